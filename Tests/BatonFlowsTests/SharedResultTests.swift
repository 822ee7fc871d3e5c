import BatonFlows
import Testing

@Suite("SharedResult: one result, many waiters, each with its own deadline")
struct SharedResultTests {
    @Test("every waiter gets the result; a later waiter gets it at once; only the first result counts")
    func everyWaiterGetsIt() async throws {
        let shared = SharedResult<Int>()
        let far = ContinuousClock.now + .seconds(3600)
        async let first = shared.value(until: far)
        async let second = shared.value(until: far)
        // Both are waiting, or will find the result: either way they get 7.
        try await Task.sleep(for: .milliseconds(50))
        shared.finish(7)
        shared.finish(8)
        #expect(await first == 7)
        #expect(await second == 7)
        #expect(await shared.value(until: .now) == 7)
    }

    @Test("a waiter past its deadline gets nil; the others keep waiting for the result")
    func deadline() async throws {
        let shared = SharedResult<String?>()
        #expect(await shared.value(until: .now + .milliseconds(20)) == nil)
        async let patient = shared.value(until: .now + .seconds(3600))
        try await Task.sleep(for: .milliseconds(50))
        shared.finish(nil)
        // The result is itself "nothing" (a host allowed, with no refusal): told apart from a wait that ended.
        #expect(await patient == .some(nil))
    }

    // Were cancellation ignored, a waiter would still be waiting when the result comes, ten
    // seconds on, and would get it instead of nil.
    @Test("a cancelled waiter ends with nil, before its deadline and without the result; so does one cancelled before it waits")
    func cancellation() async throws {
        for cancelledBeforeWaiting in [false, true] {
            let shared = SharedResult<Int>()
            let waiter = Task {
                if cancelledBeforeWaiting { withUnsafeCurrentTask { $0?.cancel() } }
                return await shared.value(until: .now + .seconds(3600))
            }
            if !cancelledBeforeWaiting {
                try await Task.sleep(for: .milliseconds(50))
                waiter.cancel()
            }
            let late = Task {
                try await Task.sleep(for: .seconds(10))
                shared.finish(99)
            }
            #expect(await waiter.value == nil, "cancelled before waiting: \(cancelledBeforeWaiting)")
            late.cancel()
            shared.finish(1)
            #expect(await shared.value(until: .now) == 1)
        }
    }
}
