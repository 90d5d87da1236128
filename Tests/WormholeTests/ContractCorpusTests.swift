// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

@testable import Wormhole

/// The fuzz corpus's inputs with their expected results (`contract/vectors/corpus-*.json`), which
/// the Python and GJS suites read too: what the fuzz targets only checked for crashes is now
/// checked for the same answer everywhere.
@Suite("The contract as data: the fuzz corpus's inputs and their answers")
struct ContractCorpusTests {
    @Test("corpus names: valid or not as a group, a directory and an identifier")
    func components() throws {
        let cases = try ContractFile("vectors/corpus-components.json").array("cases")
        #expect(cases.count >= 40)
        let makers: [String: (String) throws -> Void] = [
            "group": { _ = try GroupIdentifier($0) },
            "directory": { _ = try WormholeDirectoryName($0) },
            "identifier": { _ = try MessageIdentifier($0) },
        ]
        for vector in cases {
            let bytes = try ContractFile.bytes(hex: try #require(vector["hex"] as? String))
            // Bytes that are not UTF-8 are no string at all: never a valid name.
            let text = String(validating: bytes, as: UTF8.self)
            for (kind, make) in makers {
                let valid = try #require(vector[kind] as? Bool)
                let made = text.map { text in (try? make(text)) != nil } ?? false
                #expect(made == valid, "\(kind) \(bytes)")
            }
        }
    }

    @Test("corpus JSON texts: kept byte for byte or refused")
    func json() throws {
        let file = try ContractFile("vectors/corpus-json.json")
        let kept = try file.array(of: String.self, "kept")
        let refused = try file.array(of: String.self, "refused")
        #expect(kept.count + refused.count >= 200)
        for hex in kept {
            let data = Data(try ContractFile.bytes(hex: hex))
            #expect(try JSONDocument(data: data).data == data, "kept: \(hex.prefix(60))")
        }
        let code = try file.string("errorCode")
        for hex in refused {
            let error = #expect(throws: WormholeError.self, "refused: \(hex.prefix(60))") {
                try JSONDocument(data: Data(try ContractFile.bytes(hex: hex)))
            }
            #expect(error?.code.rawValue == code)
        }
    }
}
