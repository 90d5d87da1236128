// SPDX-License-Identifier: Apache-2.0
// The container root: the one place where the storage layer follows a path.

import Glibc
import SystemPackage
import WormholeSystem

/// Opening (and making) the root under which group containers live.
enum ContainerRoot {
    /// Opens the container root, following symlinks in its path (the root is the user's choice, like
    /// `$HOME`; only what is inside it is checked). Creates it and its missing parents with mode 0700
    /// when `create` is true; returns nil when it is missing and `create` is false.
    static func open(_ path: String, create: Bool) throws(WormholeError) -> OpenFile? {
        let flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC
        do throws(Errno) {
            return OpenFile(descriptor: try Syscall.open(path, flags), path: path)
        } catch .noSuchFileOrDirectory where create {
            try makeDirectories(path)
            do throws(Errno) {
                return OpenFile(descriptor: try Syscall.open(path, flags), path: path)
            } catch {
                throw ioError(error, "open the container root", path)
            }
        } catch .noSuchFileOrDirectory {
            return nil
        } catch {
            throw ioError(error, "open the container root", path)
        }
    }

    /// `mkdir -p` with mode 0700 for every directory it creates.
    private static func makeDirectories(_ path: String) throws(WormholeError) {
        do throws(Errno) {
            try Syscall.mkdir(path, 0o700)
        } catch .fileExists {
            return
        } catch .noSuchFileOrDirectory {
            let parent = PathText.parent(of: path)
            guard !parent.isEmpty, parent != path else {
                throw ioError(.noSuchFileOrDirectory, "create the directory", path)
            }
            try makeDirectories(parent)
            do throws(Errno) {
                try Syscall.mkdir(path, 0o700)
            } catch .fileExists {
                return
            } catch {
                throw ioError(error, "create the directory", path)
            }
        } catch {
            throw ioError(error, "create the directory", path)
        }
    }
}
