import Synchronization

/// A bounded map in two generations, an approximation of least-recently-used that needs no
/// list. New entries go into the current generation; when it is full (by count or by cost), it
/// becomes the previous one and the old previous one is dropped whole; an entry found in the
/// previous generation moves back to the current one. So at most `2 × capacity` entries, and at
/// most `2 × costLimit` of cost, are held.
///
/// Used for verified bearer tokens and for fitted screens. Written by hand: none of the
/// project's dependencies offers a bounded cache, and this is short.
package final class GenerationalCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Generation {
        var entries: [Key: (value: Value, cost: Int)] = [:]
        var cost = 0
    }

    private struct Generations {
        var current = Generation()
        var previous = Generation()
    }

    private let state = Mutex(Generations())
    /// Entries per generation; 0 holds none.
    package let capacity: Int
    /// The most cost one generation holds; an entry that costs more is not held.
    package let costLimit: Int

    package init(capacity: Int, costLimit: Int = .max) {
        self.capacity = max(0, capacity)
        self.costLimit = max(0, costLimit)
    }

    /// The value held for `key`, if any (moved to the current generation if it was in the previous).
    package func value(for key: Key) -> Value? {
        var dropped: Generation?  // freed after the lock is let go
        defer { _ = dropped }
        return state.withLock { generations in
            if let entry = generations.current.entries[key] { return entry.value }
            guard let entry = generations.previous.entries.removeValue(forKey: key) else { return nil }
            generations.previous.cost -= entry.cost
            dropped = insert(key, entry, into: &generations)
            return entry.value
        }
    }

    /// Holds `value` for `key` (replacing what was held), unless it costs more than a generation may.
    package func insert(_ value: Value, for key: Key, cost: Int = 0) {
        guard capacity > 0, cost <= costLimit else { return }
        let dropped = state.withLock { insert(key, (value, cost), into: &$0) }
        _ = dropped  // freed here, after the lock is let go
    }

    /// How many entries are held, and their cost (for tests).
    package var usage: (count: Int, cost: Int) {
        state.withLock { ($0.current.entries.count + $0.previous.entries.count, $0.current.cost + $0.previous.cost) }
    }

    /// Inserts, turning the generations over first when the current one has no room; returns
    /// the generation that fell out, for the caller to free outside the lock.
    private func insert(_ key: Key, _ entry: (value: Value, cost: Int), into generations: inout Generations) -> Generation? {
        if let replaced = generations.current.entries.removeValue(forKey: key) { generations.current.cost -= replaced.cost }
        if let stale = generations.previous.entries.removeValue(forKey: key) { generations.previous.cost -= stale.cost }
        var dropped: Generation?
        if generations.current.entries.count >= capacity || generations.current.cost + entry.cost > costLimit {
            dropped = generations.previous
            generations.previous = generations.current
            generations.current = Generation()
            generations.current.entries.reserveCapacity(min(capacity, 1024))
        }
        generations.current.entries[key] = entry
        generations.current.cost += entry.cost
        return dropped
    }
}
