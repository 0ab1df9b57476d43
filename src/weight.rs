//! Term weights (docs/algorithm.md §3): the IDF formulas and the weighting schemes.
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

/// The factors of the improved weight, any subset of them: POS, word
/// length, signal word, title. All four by default (paper 000); fewer to
/// measure what each one brings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Factors(u8);

impl Factors {
    pub const POS: Factors = Factors(1);
    pub const LENGTH: Factors = Factors(2);
    pub const SIGNAL: Factors = Factors(4);
    pub const TITLE: Factors = Factors(8);
    pub const ALL: Factors = Factors(15);
    const NAMES: [(&'static str, Factors); 4] =
        [("pos", Factors::POS), ("length", Factors::LENGTH), ("signal", Factors::SIGNAL), ("title", Factors::TITLE)];

    pub fn has(self, f: Factors) -> bool {
        self.0 & f.0 == f.0
    }

    /// `pos+length+signal+title` or any part of it, in that order.
    fn names(self) -> String {
        Factors::NAMES.iter().filter(|(_, f)| self.has(*f)).map(|(n, _)| *n).collect::<Vec<_>>().join("+")
    }
}

/// How a term of a document is weighted in its SimHash. Written as `none`,
/// `tf`, `tfidf`, `improved`, or `improved:F+F…` for the improved weight
/// with only the factors named (pos, length, signal, title).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Weighting {
    /// Every distinct term weighs 1.
    None,
    /// Raw occurrence counts (the source blog's choice).
    Tf,
    /// `tf · idf`.
    Tfidf,
    /// `tf · idf · (1 + cx + len + logo + title)` (paper 000; the default),
    /// with the factors chosen.
    Improved(Factors),
}

impl Default for Weighting {
    fn default() -> Self {
        Weighting::Improved(Factors::ALL)
    }
}

impl Weighting {
    /// The improved weight with all its factors.
    pub const IMPROVED: Weighting = Weighting::Improved(Factors::ALL);

    /// Whether the weight needs corpus document frequencies.
    pub fn needs_idf(self) -> bool {
        matches!(self, Weighting::Tfidf | Weighting::Improved(_))
    }

    /// Whether the weight needs POS tags (tagging is slower than cutting).
    /// Every variant of the improved weight segments the same way, with tags,
    /// so that leaving out a factor changes nothing else.
    pub fn needs_pos(self) -> bool {
        matches!(self, Weighting::Improved(_))
    }

    /// The weight of a term from its document statistics and its idf.
    pub fn weight(self, stats: &TermFactors, idf: f64) -> f64 {
        match self {
            Weighting::None => 1.0,
            Weighting::Tf => f64::from(stats.count),
            Weighting::Tfidf => stats.tf * idf,
            Weighting::Improved(f) => {
                let part = |factor: Factors, value: f64| if f.has(factor) { value } else { 0.0 };
                stats.tf
                    * idf
                    * (1.0
                        + part(Factors::POS, f64::from(stats.cx))
                        + part(Factors::LENGTH, stats.len)
                        + part(Factors::SIGNAL, f64::from(stats.logo))
                        + part(Factors::TITLE, f64::from(stats.title)))
            }
        }
    }
}

impl fmt::Display for Weighting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Weighting::None => f.write_str("none"),
            Weighting::Tf => f.write_str("tf"),
            Weighting::Tfidf => f.write_str("tfidf"),
            Weighting::Improved(Factors::ALL) => f.write_str("improved"),
            Weighting::Improved(factors) => write!(f, "improved:{}", factors.names()),
        }
    }
}

impl From<Weighting> for String {
    fn from(w: Weighting) -> String {
        w.to_string()
    }
}

impl TryFrom<String> for Weighting {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl FromStr for Weighting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "none" => return Ok(Weighting::None),
            "tf" => return Ok(Weighting::Tf),
            "tfidf" => return Ok(Weighting::Tfidf),
            "improved" => return Ok(Weighting::IMPROVED),
            _ => {}
        }
        let Some(list) = lower.strip_prefix("improved:") else {
            return Err(format!("unknown weighting '{s}': use none, tf, tfidf, improved or improved:FACTORS"));
        };
        let mut factors = Factors(0);
        for name in list.split('+').map(str::trim).filter(|n| !n.is_empty()) {
            let (_, f) = Factors::NAMES.iter().find(|(n, _)| *n == name).ok_or_else(|| {
                format!("unknown factor '{name}' in weighting '{s}': use pos, length, signal, title joined by '+'")
            })?;
            factors = Factors(factors.0 | f.0);
        }
        Ok(Weighting::Improved(factors))
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
        assert_eq!(Weighting::IMPROVED.weight(&t, 2.0), 0.5 * (1.0 + 3.0 + 0.5 + 5.0));
        let pos_only: Weighting = "improved:pos".parse().unwrap();
        assert_eq!(pos_only.weight(&t, 2.0), 0.5 * (1.0 + 3.0));
        let none: Weighting = "improved:".parse().unwrap();
        assert_eq!(none.weight(&t, 2.0), Weighting::Tfidf.weight(&t, 2.0));
        assert!("improved:length+signal".parse::<Weighting>().unwrap().needs_pos());
        assert!(!Weighting::Tfidf.needs_pos());
    }

    #[test]
    fn names_round_trip() {
        for w in ["none", "tf", "tfidf", "improved", "improved:pos", "improved:length+title", "improved:"] {
            assert_eq!(w.parse::<Weighting>().unwrap().to_string(), w);
        }
        // Factors in any order and case name the same weighting; all four is plain `improved`.
        assert_eq!("Improved:TITLE+pos".parse::<Weighting>().unwrap().to_string(), "improved:pos+title");
        assert_eq!("improved:pos+length+signal+title".parse::<Weighting>().unwrap(), Weighting::IMPROVED);
        assert!("improved:pos+colour".parse::<Weighting>().unwrap_err().contains("unknown factor 'colour'"));
        // Serialised (job files, metadata) as the same text.
        assert_eq!(serde_json::to_string(&Weighting::IMPROVED).unwrap(), "\"improved\"");
        assert_eq!(serde_json::from_str::<Weighting>("\"improved:signal\"").unwrap().to_string(), "improved:signal");
        for f in [IdfFormula::Standard, IdfFormula::DfPlusOne] {
            assert_eq!(f.as_str().parse::<IdfFormula>().unwrap(), f);
        }
        assert!("bm25".parse::<Weighting>().unwrap_err().contains("unknown weighting 'bm25'"));
    }
}
