import Foundation
import Testing

/// A test that hangs on purpose, and only when asked to: with `BATON_TEST_HANG_PROBE=1`, it
/// waits for a continuation that nobody resumes, the way a real hang would. It shows that
/// scripts/test.sh's stall watchdog (scripts/stall-watch.py) ends a hung pass and names the test:
///
///     BATON_TEST_HANG_PROBE=1 BATON_TEST_STALL=20 scripts/test.sh --filter StallWatchProbeTests
///
/// That run fails within about 20 seconds of the test starting, and its output names this
/// test. Without the watchdog, the run would wait until someone killed it.
@Suite("The stall watchdog's probe")
struct StallWatchProbeTests {
    @Test(
        "hangs until the stall watchdog stops the pass",
        .enabled(if: ProcessInfo.processInfo.environment["BATON_TEST_HANG_PROBE"] == "1", "only when asked to"))
    func hang() async {
        // Never resumed. Cancellation does not end this wait, so neither would a time limit.
        await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }
    }
}
