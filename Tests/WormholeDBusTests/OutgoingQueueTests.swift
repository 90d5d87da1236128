// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import WormholeDBus

@Suite("The bounded outgoing queue")
struct OutgoingQueueTests {
    @Test("holds at most its limit in bytes and refuses what does not fit")
    func boundedByBytes() {
        var queue = OutgoingQueue<Int>(limit: 100)
        let r1 = queue.append(1, bytes: 60, key: nil)
        #expect(r1)
        let r2 = queue.append(2, bytes: 40, key: nil)
        #expect(r2)
        let r3 = queue.append(3, bytes: 1, key: nil)
        #expect(!r3, "the queue is full at 100 bytes")
        #expect(queue.bytes == 100)
        let r4 = queue.take(maximumBytes: 60)
        #expect(r4 == [1])
        let r5 = queue.append(3, bytes: 50, key: nil)
        #expect(r5)
        let r6 = queue.take(maximumBytes: .max)
        #expect(r6 == [2, 3])
        #expect(queue.isEmpty && queue.bytes == 0)
    }

    @Test("an empty queue takes one message larger than its limit")
    func oversizedWhenEmpty() {
        var queue = OutgoingQueue<Int>(limit: 10)
        let r7 = queue.append(1, bytes: 50, key: nil)
        #expect(r7)
        let r8 = queue.append(2, bytes: 1, key: nil)
        #expect(!r8)
    }

    @Test("a message with a key replaces the queued one with that key, in place")
    func replacing() {
        var queue = OutgoingQueue<String>(limit: 100)
        let r9 = queue.append("a1", bytes: 10, key: "a")
        #expect(r9)
        let r10 = queue.append("b1", bytes: 10, key: "b")
        #expect(r10)
        for value in 2...1000 {
            let r11 = queue.append("a\(value)", bytes: 10, key: "a")
            #expect(r11)
        }
        #expect(queue.count == 2 && queue.bytes == 20)
        let r12 = queue.take(maximumBytes: .max)
        #expect(r12 == ["a1000", "b1"])
        let r13 = queue.append("a1001", bytes: 10, key: "a")
        #expect(r13, "a key taken is queued anew")
        let r14 = queue.take(maximumBytes: .max)
        #expect(r14 == ["a1001"])
    }

    @Test("messages queued after a job wait until the job ran; those before go with it")
    func jobMarks() {
        var queue = OutgoingQueue<Int>(limit: 100)
        let r15 = queue.append(1, bytes: 1, key: nil)
        #expect(r15)
        queue.markJob()
        let r16 = queue.append(2, bytes: 1, key: nil)
        #expect(r16)
        queue.markJob()
        let r17 = queue.append(3, bytes: 1, key: nil)
        #expect(r17)
        #expect(queue.hasPendingJobs)
        let r18 = queue.take(maximumBytes: .max)
        #expect(r18 == [1], "nothing after the first job's mark")
        let r19 = queue.takeBeforeJob()
        #expect(r19 == [], "the first job: what came before it is written")
        let r20 = queue.take(maximumBytes: .max)
        #expect(r20 == [2])
        let r21 = queue.takeBeforeJob()
        #expect(r21 == [])
        #expect(!queue.hasPendingJobs)
        let r22 = queue.take(maximumBytes: .max)
        #expect(r22 == [3])
    }

    @Test("a job takes every message queued before it, however many bytes")
    func jobTakesItsPrefix() {
        var queue = OutgoingQueue<Int>(limit: 100)
        for value in 1...5 {
            let r23 = queue.append(value, bytes: 20, key: nil)
            #expect(r23)
        }
        queue.markJob()
        let r24 = queue.takeBeforeJob()
        #expect(r24 == [1, 2, 3, 4, 5])
        #expect(queue.isEmpty)
    }
}

extension OutgoingQueueTests {
    @Test(
        "a message appended without replacing is the newest of its key: a later replacement replaces it, not an older one"
    )
    func appendedWithoutReplacing() {
        var queue = OutgoingQueue<String>(limit: 100)
        let first = queue.append("a1", bytes: 10, key: "a", replacing: false)
        let second = queue.append("a2", bytes: 10, key: "a", replacing: false)
        let third = queue.append("a3", bytes: 10, key: "a")
        #expect(first && second && third)
        let taken = queue.take(maximumBytes: .max)
        #expect(taken == ["a1", "a3"], "the latest state is the last one written")
    }
}
