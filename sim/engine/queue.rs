//! The event queue.
//!
//! # Ordering contract
//!
//! Events are delivered in ascending `(time, seq)` order, where `seq` is a counter the queue
//! assigns at scheduling time. Two events scheduled for the same tick are therefore delivered in
//! the order they were scheduled (FIFO), whatever their payload. Scheduling an event for a time
//! earlier than the last delivered one is refused (it would make simulated time run backwards):
//! such events are delivered at the current time instead, after everything already due then.
//! Nothing about the order depends on hashing, addresses or threads, so a run is reproducible
//! from its seed alone.

use super::Time;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// An event together with its delivery key.
#[derive(Debug, Clone)]
pub struct Scheduled<E> {
    /// When the event is delivered.
    pub time: Time,
    /// Tie-breaker: the order in which events were scheduled.
    pub seq: u64,
    /// The payload.
    pub event: E,
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl<E> Eq for Scheduled<E> {}
impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Scheduled<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

/// A min-queue of events keyed by `(time, seq)`; see the module docs for the ordering contract.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Scheduled<E>>>,
    next_seq: u64,
    now: Time,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time zero.
    pub fn new() -> Self {
        EventQueue { heap: BinaryHeap::new(), next_seq: 0, now: Time::ZERO }
    }

    /// The time of the last delivered event (the simulation clock).
    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedules `event` at `time` (clamped to now, so time never runs backwards).
    pub fn schedule(&mut self, time: Time, event: E) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let time = time.max(self.now);
        self.heap.push(Reverse(Scheduled { time, seq, event }));
        seq
    }

    /// Schedules `event` `delay` ticks from now.
    pub fn schedule_in(&mut self, delay: u64, event: E) -> u64 {
        self.schedule(self.now.after(delay), event)
    }

    /// Removes and returns the next event, advancing the clock to its time.
    pub fn pop(&mut self) -> Option<Scheduled<E>> {
        let Reverse(next) = self.heap.pop()?;
        debug_assert!(next.time >= self.now, "time ran backwards");
        self.now = next.time;
        Some(next)
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_time_is_fifo_and_time_is_monotone() {
        let mut q = EventQueue::new();
        q.schedule(Time(5), "b");
        q.schedule(Time(1), "a");
        q.schedule(Time(5), "c");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|s| s.event).collect();
        assert_eq!(order, ["a", "b", "c"]);
    }

    #[test]
    fn past_events_are_clamped_to_now() {
        let mut q = EventQueue::new();
        q.schedule(Time(10), 1);
        q.pop();
        q.schedule(Time(3), 2);
        let e = q.pop().unwrap();
        assert_eq!(e.time, Time(10));
    }
}
