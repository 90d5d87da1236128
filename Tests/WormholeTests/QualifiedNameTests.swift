// SPDX-License-Identifier: Apache-2.0
// The module is `Wormhole` and no type is: a client can spell every type with the module's
// name in front, as it must when two modules export the same name. (When the class was also
// called `Wormhole`, `Wormhole.MessageIdentifier` looked for a nested type and did not compile.)

import Testing
import Wormhole
import WormholeDBus

@Suite("Module-qualified names")
struct QualifiedNameTests {
    @Test("Wormhole.MessageIdentifier, Wormhole.MessageCenter and friends compile and resolve")
    func qualified() throws {
        let identifier: Wormhole.MessageIdentifier = Wormhole.MessageIdentifier("clip")
        let name: Wormhole.NotificationName = Wormhole.NotificationName("com.example.app.refresh")
        let options = Wormhole.MessageCenter.ListenOptions(deliversStoredMessageOnStart: true)
        let transiting: Wormhole.MessageCenter.Transiting = .file
        let centerType: Wormhole.MessageCenter.Type = Wormhole.MessageCenter.self
        let delivery: WormholeDBus.DeliveryQueue = .serial
        let error = Wormhole.WormholeError(.invalidIdentifier, value: "a/b", "identifier 'a/b' contains '/'")
        #expect(identifier.rawValue == "clip")
        #expect(name.bucketInterface == "org.wormhole.Notify1.BE6A2")
        #expect(options.deliversStoredMessageOnStart)
        if case .file = transiting {} else { Issue.record("expected .file") }
        #expect(centerType == MessageCenter.self)
        if case .serial = delivery {} else { Issue.record("expected .serial") }
        #expect(error.value == "a/b")
    }
}
