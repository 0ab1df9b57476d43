//! Term weights (spec §3): the IDF formulas and the weighting schemes.
//!
//! The per-document parts of the improved weight (tf and the POS, length,
//! signal-word and title factors) come from [`crate::text::DocStats`]; the
//! corpus-wide part (idf) from document frequencies that the engine
//! aggregates over every input. The weight itself is an SQL expression
//! (see `sql/`), so a reader sees the formula where it is applied.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How idf is computed from a document frequency `df` and a corpus size `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum IdfFormula {
    /// `ln(N / df + 0.01)` (paper 000; the default).
    #[default]
    Standard,
    /// `ln(N / (df + 1))`, clamped at 0 (paper 001, notes 004).
    DfPlusOne,
}

impl IdfFormula {
    pub fn idf(self, df: f64, n: f64) -> f64 {
        if !(n > 0.0) {
            return 0.0;
        }
        match self {
            IdfFormula::Standard => (n / df.max(1.0) + 0.01).ln(),
            IdfFormula::DfPlusOne => (n / (df.max(0.0) + 1.0)).ln().max(0.0),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            IdfFormula::Standard => "standard",
            IdfFormula::DfPlusOne => "df-plus-one",
        }
    }
}

impl fmt::Display for IdfFormula {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for IdfFormula {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "standard" => Ok(IdfFormula::Standard),
            "df-plus-one" => Ok(IdfFormula::DfPlusOne),
            _ => Err(format!("unknown IDF formula '{s}': use standard (ln(N/df+0.01)) or df-plus-one (ln(N/(df+1)))")),
        }
    }
}

/// The per-document statistics of a term that weights are made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TermFactors {
    /// Occurrences of the term in the document.
    pub count: u32,
    /// `count / total kept terms of the document`.
    pub tf: f64,
    /// Part-of-speech factor: 3 for a noun, 2 for a verb, 1 otherwise (the
    /// largest over the term's occurrences).
    pub cx: u8,
    /// Length factor `(chars − min) / (max − min)` over the document's kept terms.
    pub len: f64,
    /// Signal-word factor: 5 if the term is or contains a signal word, else 0.
    pub logo: u8,
    /// Title factor: 5 if the term also occurs among the title's terms, else 0.
    pub title: u8,
}

/// How a term of a document is weighted in its SimHash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Weighting {
    /// Every distinct term weighs 1.
    None,
    /// Raw occurrence counts (the source blog's choice).
    Tf,
    /// `tf · idf`.
    Tfidf,
    /// `tf · idf · (1 + cx + len + logo + title)` (paper 000; the default).
    #[default]
    Improved,
}

impl Weighting {
    pub fn as_str(self) -> &'static str {
        match self {
            Weighting::None => "none",
            Weighting::Tf => "tf",
            Weighting::Tfidf => "tfidf",
            Weighting::Improved => "improved",
        }
    }

    /// Whether the weight needs corpus document frequencies.
    pub fn needs_idf(self) -> bool {
        matches!(self, Weighting::Tfidf | Weighting::Improved)
    }

    /// Whether the weight needs POS tags (tagging is slower than cutting).
    pub fn needs_pos(self) -> bool {
        self == Weighting::Improved
    }

    /// The weight of a term from its document statistics and its idf.
    pub fn weight(self, stats: &TermFactors, idf: f64) -> f64 {
        match self {
            Weighting::None => 1.0,
            Weighting::Tf => f64::from(stats.count),
            Weighting::Tfidf => stats.tf * idf,
            Weighting::Improved => {
                stats.tf * idf * (1.0 + f64::from(stats.cx) + stats.len + f64::from(stats.logo) + f64::from(stats.title))
            }
        }
    }
}

impl fmt::Display for Weighting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Weighting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Weighting::None),
            "tf" => Ok(Weighting::Tf),
            "tfidf" => Ok(Weighting::Tfidf),
            "improved" => Ok(Weighting::Improved),
            _ => Err(format!("unknown weighting '{s}': use none, tf, tfidf or improved")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idf_formulas() {
        assert!((IdfFormula::Standard.idf(10.0, 100.0) - (10.01f64).ln()).abs() < 1e-12);
        assert!((IdfFormula::DfPlusOne.idf(9.0, 100.0) - (10.0f64).ln()).abs() < 1e-12);
        // A term in every document: df-plus-one goes negative and is clamped.
        assert_eq!(IdfFormula::DfPlusOne.idf(100.0, 100.0), 0.0);
        assert!(IdfFormula::Standard.idf(100.0, 100.0) > 0.0);
        assert_eq!(IdfFormula::Standard.idf(1.0, 0.0), 0.0);
    }

    #[test]
    fn weights_follow_the_formulas() {
        let t = TermFactors { count: 3, tf: 0.25, cx: 3, len: 0.5, logo: 5, title: 0 };
        assert_eq!(Weighting::None.weight(&t, 2.0), 1.0);
        assert_eq!(Weighting::Tf.weight(&t, 2.0), 3.0);
        assert_eq!(Weighting::Tfidf.weight(&t, 2.0), 0.5);
        assert_eq!(Weighting::Improved.weight(&t, 2.0), 0.5 * (1.0 + 3.0 + 0.5 + 5.0));
    }

    #[test]
    fn names_round_trip() {
        for w in [Weighting::None, Weighting::Tf, Weighting::Tfidf, Weighting::Improved] {
            assert_eq!(w.as_str().parse::<Weighting>().unwrap(), w);
        }
        for f in [IdfFormula::Standard, IdfFormula::DfPlusOne] {
            assert_eq!(f.as_str().parse::<IdfFormula>().unwrap(), f);
        }
        assert!("bm25".parse::<Weighting>().unwrap_err().contains("unknown weighting 'bm25'"));
    }
}
