/* SPDX-License-Identifier: Apache-2.0 */
// Only what Swift cannot import from the Linux headers the process's machinery uses (the
// event loop, the inotify instance, the doorbell's socket, the diagnostic timeline): macros,
// variadic functions and declarations glibc makes only under `_GNU_SOURCE`. Every symbol here
// carries the module prefix.
#ifndef CWORMHOLESYSTEM_SHIM_H
#define CWORMHOLESYSTEM_SHIM_H

// Linux event APIs the Glibc module does not export, for the loop's thread.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
// The doorbell's datagram socket (credentials in ancillary data need the CMSG_* macros).
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/// Names the calling thread (what /proc/PID/task/TID/comm and `ps -T` show; 15 bytes at most).
/// prctl is variadic, which Swift cannot call.
static inline int cwormhole_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

/// Receives one datagram from the doorbell socket `fd` (non-blocking) with the sender's
/// credentials (`SCM_CREDENTIALS`, given by the kernel because the socket has `SO_PASSCRED`):
/// the datagram's length, or -1 with errno set. `*uid` is `(unsigned)-1` and `*pid` 0 when no
/// credentials came; `*truncated` is 1 when the datagram was longer than `length`. File
/// descriptors a sender passed (`SCM_RIGHTS`) are closed, never kept. The CMSG_* macros are
/// what Swift cannot import; `SCM_CREDENTIALS` (2 on Linux) is declared by glibc only under
/// `_GNU_SOURCE`, so its value is written here.
static inline long cwormhole_receive_with_credentials(
    int fd, void *buffer, size_t length, unsigned int *uid, int *pid, int *truncated) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(3 * sizeof(int)) + CMSG_SPACE(4 * sizeof(int))];
    } control;
    struct iovec vector = {buffer, length};
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof control.bytes;
    long count = recvmsg(fd, &message, MSG_DONTWAIT);
    if (count < 0) return count;
    *uid = (unsigned int)-1;
    *pid = 0;
    *truncated = (message.msg_flags & MSG_TRUNC) != 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET) continue;
        if (header->cmsg_type == 2 && header->cmsg_len >= CMSG_LEN(3 * sizeof(int))) {
            int credentials[3];  // struct ucred: pid, uid, gid
            memcpy(credentials, CMSG_DATA(header), sizeof credentials);
            *pid = credentials[0];
            *uid = (unsigned int)credentials[1];
        } else if (header->cmsg_type == SCM_RIGHTS) {
            size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t index = 0; index < count; index++) {
                int passed;
                memcpy(&passed, CMSG_DATA(header) + index * sizeof(int), sizeof passed);
                close(passed);
            }
        }
    }
    return count;
}

/// The CPU the calling thread runs on (the doorbell's diagnostic timeline, HopTrace.swift):
/// glibc's `sched_getcpu` (read from the kernel's rseq area or the vDSO, no system call), declared
/// here because <sched.h> declares it only with `_GNU_SOURCE`.
extern int sched_getcpu(void);
static inline int cwormhole_current_cpu(void) { return sched_getcpu(); }

#endif
