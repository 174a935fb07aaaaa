//! A small deterministic pseudo-random generator (xorshift64) for randomized tests and
//! benchmarks, so a failure reproduces from its seed. Not for anything a client could
//! predict to its advantage.

pub struct XorShift(pub u64);

impl XorShift {
    /// A generator from a seed (zero is replaced: xorshift would stay at zero forever).
    pub fn new(seed: u64) -> XorShift {
        XorShift(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}
