//! Per-primitive accumulators of the primitive terms (Y_i, X_i), flat over all shells.

/// (Y_i, X_i) for every primitive of the basis, in shell order then primitive order.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PrimitiveTerms {
    /// Y_i: the r^2 (raised) functions.
    pub raised: Vec<f64>,
    /// X_i: the plain primitive functions.
    pub plain: Vec<f64>,
}

impl PrimitiveTerms {
    /// All zero, for `count` primitives.
    pub fn zeros(count: usize) -> Self {
        Self {
            raised: vec![0.0; count],
            plain: vec![0.0; count],
        }
    }

    /// Adds one [raised, plain] contribution to primitive `index`.
    pub fn add(&mut self, index: usize, [raised, plain]: [f64; 2]) {
        self.raised[index] += raised;
        self.plain[index] += plain;
    }

    /// Adds another accumulator, element by element.
    pub fn add_all(&mut self, other: &PrimitiveTerms) {
        for (a, b) in self.raised.iter_mut().zip(&other.raised) {
            *a += b;
        }
        for (a, b) in self.plain.iter_mut().zip(&other.plain) {
            *a += b;
        }
    }
}
