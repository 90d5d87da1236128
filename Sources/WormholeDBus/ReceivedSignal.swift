// SPDX-License-Identifier: Apache-2.0

extension Signal {
    /// A signal as it was received, every field given at once (no copy of a half-made signal
    /// to set its sender and serial afterwards): for ``MessageCoding/readSignal(_:strings:)``.
    init(
        received path: ObjectPath, interface: InterfaceName, member: MemberName, sender: String?, serial: UInt32,
        arguments: [DBusValue]
    ) {
        self.path = path
        self.interface = interface
        self.member = member
        self.sender = sender
        self.arguments = arguments
        self.serial = serial
    }
}
