//! The trace hash: a running FNV-1a hash over every processed event and the decisions it led to.
//! Two runs with the same hash processed the same events in the same order with the same
//! outcomes; the optional per-event log lets `check-determinism` name the first divergence.

/// One processed event in the optional trace log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// Position of the event in processing order.
    pub index: u64,
    /// Simulated time of the event.
    pub time: u64,
    /// Queue sequence number.
    pub seq: u64,
    /// Human-readable description of the event.
    pub label: String,
    /// Running hash after this event.
    pub hash: u64,
}

/// Running FNV-1a (64-bit) hash with an optional event log.
#[derive(Clone, Debug)]
pub struct TraceHash {
    state: u64,
    events: u64,
    log: Option<Vec<TraceEntry>>,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

impl TraceHash {
    /// A fresh hash; `record` keeps a per-event log (costly, for diagnosis only).
    pub fn new(record: bool) -> Self {
        TraceHash { state: FNV_OFFSET, events: 0, log: record.then(Vec::new) }
    }

    /// Mixes raw bytes into the hash.
    pub fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.state ^= u64::from(*b);
            self.state = self.state.wrapping_mul(FNV_PRIME);
        }
    }

    /// Mixes one integer.
    pub fn u64(&mut self, x: u64) {
        self.bytes(&x.to_le_bytes());
    }

    /// Mixes one float by its bit pattern.
    pub fn f64(&mut self, x: f64) {
        self.u64(x.to_bits());
    }

    /// Marks the end of one event; `label` is only built when the log is on.
    pub fn end_event(&mut self, time: u64, seq: u64, label: impl FnOnce() -> String) {
        self.u64(time);
        self.u64(seq);
        if let Some(log) = self.log.as_mut() {
            log.push(TraceEntry { index: self.events, time, seq, label: label(), hash: self.state });
        }
        self.events += 1;
    }

    /// The current hash value.
    pub fn value(&self) -> u64 {
        self.state
    }

    /// Number of events processed.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The event log, if recording.
    pub fn log(&self) -> Option<&[TraceEntry]> {
        self.log.as_deref()
    }

    /// Takes the event log out.
    pub fn take_log(&mut self) -> Option<Vec<TraceEntry>> {
        self.log.take()
    }
}

/// Index of the first entry whose hash differs between two logs (or where one log ends).
pub fn first_divergence(a: &[TraceEntry], b: &[TraceEntry]) -> Option<usize> {
    let n = a.len().min(b.len());
    (0..n).find(|&i| a[i].hash != b[i].hash || a[i].label != b[i].label).or(if a.len() != b.len() {
        Some(n)
    } else {
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(events: &[(u64, &str)]) -> Vec<TraceEntry> {
        let mut h = TraceHash::new(true);
        for (i, (x, label)) in events.iter().enumerate() {
            h.u64(*x);
            h.end_event(i as u64, i as u64, || label.to_string());
        }
        h.take_log().unwrap()
    }

    #[test]
    fn names_the_first_divergent_event() {
        let a = log(&[(1, "TaskArrive"), (2, "AgentCall"), (3, "AgentCall"), (4, "TaskFinish")]);
        let b = log(&[(1, "TaskArrive"), (2, "AgentCall"), (9, "AgentCall"), (4, "TaskFinish")]);
        assert_eq!(first_divergence(&a, &b), Some(2));
        assert_eq!(first_divergence(&a, &a.clone()), None);
        // A trace that stops early diverges where it ends.
        assert_eq!(first_divergence(&a, &a[..3]), Some(3));
        // Every later hash differs too: the hash is running.
        assert!(a[3].hash != b[3].hash);
    }
}
