//! Segmentation of normalised text into features (docs/algorithm.md §2).
//!
//! An [`Analyzer`] bundles what segmentation needs besides the text: the
//! jieba dictionary (plus an optional user dictionary), the stop words and the
//! signal words. Building one loads a dictionary, so analyzers are cached per
//! process by their options string ([`Analyzer::get`]); SQL functions receive
//! that string as an argument, which keeps them stateless and lets every node
//! of a cluster build the same analyzer by itself.
//!
//! Text without any Han character is split at Unicode word boundaries
//! (UAX #29) in every word mode, so English or Russian documents never go
//! through a Chinese dictionary.

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io::BufReader;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};

use jieba_rs::Jieba;

use super::learned_tags::{run_around, LearnedFactors, RecentFactors, Wanted};
use super::WordSet;
use crate::fingerprint::hash64;
use unicode_segmentation::UnicodeSegmentation;

const BUILTIN_STOPWORDS: &str = include_str!("stopwords.txt");
const BUILTIN_SIGNAL_WORDS: &str = include_str!("signal_words.txt");

/// Longest character n-gram accepted by `char-N`.
pub const MAX_CHAR_NGRAM: usize = 16;

/// How text is cut into features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// jieba exact mode with HMM for unknown words (the default).
    Precise,
    /// jieba full mode: every dictionary word, overlapping.
    Full,
    /// jieba search-engine mode: precise words plus their dictionary sub-words.
    Search,
    /// Overlapping character n-grams of the normalised text (shingles).
    Chars(usize),
}

impl Mode {
    /// Whether this mode produces POS tags that mean something.
    pub fn is_word_mode(self) -> bool {
        !matches!(self, Mode::Chars(_))
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Precise => f.write_str("precise"),
            Mode::Full => f.write_str("full"),
            Mode::Search => f.write_str("search"),
            Mode::Chars(n) => write!(f, "char-{n}"),
        }
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "precise" | "" => Ok(Mode::Precise),
            "full" => Ok(Mode::Full),
            "search" => Ok(Mode::Search),
            other => {
                let n = other
                    .strip_prefix("char-")
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|n| (1..=MAX_CHAR_NGRAM).contains(n));
                n.map(Mode::Chars).ok_or_else(|| {
                    format!(
                        "unknown tokenizer '{s}': use precise, full, search or char-N \
                         with N from 1 to {MAX_CHAR_NGRAM}"
                    )
                })
            }
        }
    }
}

/// One feature of a document: a term and its part-of-speech tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    pub term: &'a str,
    /// ICTCLAS/PKU tag (`n`, `v`, `eng`, `m`, `x`, …); `x` when not tagged.
    pub pos: &'a str,
}

/// Files that customise an analyzer. Parsed from the options string that SQL
/// functions take: `key=value` pairs separated by `;`, keys `user_dict`,
/// `stopwords` and `signal_words`, each a local file path. The empty string
/// means the built-in defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AnalyzerOptions {
    pub user_dict: Option<String>,
    pub stopwords: Option<String>,
    pub signal_words: Option<String>,
}

impl AnalyzerOptions {
    pub fn parse(options: &str) -> Result<Self, String> {
        let mut parsed = AnalyzerOptions::default();
        for part in options.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                format!("analyzer option '{part}' is not key=value (keys: user_dict, stopwords, signal_words)")
            })?;
            let value = Some(value.trim().to_string()).filter(|v| !v.is_empty());
            match key.trim() {
                "user_dict" => parsed.user_dict = value,
                "stopwords" => parsed.stopwords = value,
                "signal_words" => parsed.signal_words = value,
                other => {
                    return Err(format!(
                        "unknown analyzer option '{other}' (keys: user_dict, stopwords, signal_words)"
                    ))
                }
            }
        }
        Ok(parsed)
    }

    /// The canonical options string, as SQL functions take it.
    pub fn to_options_string(&self) -> String {
        let mut parts = Vec::new();
        for (key, value) in [
            ("user_dict", &self.user_dict),
            ("stopwords", &self.stopwords),
            ("signal_words", &self.signal_words),
        ] {
            if let Some(v) = value {
                parts.push(format!("{key}={v}"));
            }
        }
        parts.join(";")
    }
}

/// Dictionary, stop words and signal words: everything segmentation needs.
pub struct Analyzer {
    jieba: Jieba,
    stopwords: WordSet,
    signal_words: WordSet,
    /// Words' POS factors, learned from jieba-rs's tags (learned_tags.rs).
    learned: LearnedFactors,
}

impl fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Analyzer")
            .field("stopwords", &self.stopwords.len())
            .field("signal_words", &self.signal_words.len())
            .finish()
    }
}

fn word_list(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// The largest frequency a user dictionary may give a word. jieba-rs sums
/// every word's frequency in a `usize` without a check (a debug build
/// panics on the overflow, a release build wraps and cuts with nonsense
/// probabilities); its own dictionary's words sum to about 60 million.
const MAX_USER_FREQ: u64 = 1_000_000_000_000;

/// Refuse a user dictionary whose frequencies jieba-rs cannot add up,
/// naming the line: jieba-rs reads a line's second field as the frequency.
fn check_frequencies(path: &str, text: &[u8]) -> Result<(), String> {
    for (n, line) in String::from_utf8_lossy(text).lines().enumerate() {
        let Some(freq) = line.split_whitespace().nth(1).and_then(|f| f.parse::<u64>().ok()) else { continue };
        if freq > MAX_USER_FREQ {
            return Err(format!(
                "user dictionary '{path}', line {}: frequency {freq} is too large (at most {MAX_USER_FREQ}; \
                 jieba's own words' frequencies add up to about 60 million)",
                n + 1
            ));
        }
    }
    Ok(())
}

fn read_list(path: &str, what: &str) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("cannot read {what} file '{path}': {e}"))
}

impl Analyzer {
    /// Build an analyzer from its options (loads dictionaries: slow, use [`Analyzer::get`]).
    pub fn new(options: &AnalyzerOptions) -> Result<Self, String> {
        let mut jieba = Jieba::new();
        if let Some(path) = &options.user_dict {
            let text = fs::read(path).map_err(|e| format!("cannot read user dictionary '{path}': {e}"))?;
            check_frequencies(path, &text)?;
            jieba.load_dict(&mut BufReader::new(text.as_slice())).map_err(|e| {
                format!("user dictionary '{path}' is not in jieba format (word [freq] [tag] per line): {e}")
            })?;
        }
        let stop_text = match &options.stopwords {
            Some(path) => read_list(path, "stop-word")?,
            None => BUILTIN_STOPWORDS.to_string(),
        };
        let signal_text = match &options.signal_words {
            Some(path) => read_list(path, "signal-word")?,
            None => BUILTIN_SIGNAL_WORDS.to_string(),
        };
        // Normalise the lists the way documents are normalised, so that a
        // full-width or upper-case entry still matches.
        let stopwords: Vec<String> = word_list(&stop_text).map(super::normalize).collect();
        let signal_words: Vec<String> =
            word_list(&signal_text).map(super::normalize).filter(|w| !w.is_empty()).collect();
        Ok(Analyzer {
            jieba,
            stopwords: WordSet::new(stopwords.iter().map(String::as_str)),
            signal_words: WordSet::new(signal_words.iter().map(String::as_str)),
            learned: LearnedFactors::default(),
        })
    }

    /// The process-wide analyzer for an options string, built on first use.
    /// A caller that finds it being built (by [`Analyzer::build_in_background`]
    /// or another thread) waits for that build instead of loading the
    /// dictionary again. A failed build is not kept: the next caller tries
    /// again (a long-lived executor may see the missing file appear).
    pub fn get(options: &str) -> Result<Arc<Analyzer>, String> {
        type Slot = Arc<OnceLock<Result<Arc<Analyzer>, String>>>;
        static CACHE: OnceLock<Mutex<HashMap<String, Slot>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let slot: Slot = {
            let mut slots = cache.lock().expect("analyzer cache poisoned");
            match slots.get(options) {
                Some(slot) => slot.clone(),
                None => slots.entry(options.to_string()).or_default().clone(),
            }
        };
        // Built outside the map's lock: other options strings do not wait
        // for this one's dictionary.
        let built = slot.get_or_init(|| Ok(Arc::new(Analyzer::new(&AnalyzerOptions::parse(options)?)?))).clone();
        if built.is_err() {
            let mut slots = cache.lock().expect("analyzer cache poisoned");
            if slots.get(options).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                slots.remove(options);
            }
        }
        built
    }

    /// Start building the analyzer of `options` on a thread of its own, so
    /// that loading the dictionary (about 0.1 s) overlaps the checks of the
    /// inputs; [`Analyzer::get`] then waits for it, and reports its error.
    /// With `tags`, the thread then loads jieba-rs's POS model too
    /// ([`load_pos_model`]).
    pub fn build_in_background(options: &str, tags: bool) {
        let options = options.to_string();
        std::thread::spawn(move || {
            if Analyzer::get(&options).is_ok() && tags {
                load_pos_model();
            }
        });
    }

    /// Whether `term` is a feature: it has a letter or digit and is no stop word.
    pub fn is_feature(&self, term: &str) -> bool {
        self.is_feature_hashed(term, hash64(term.as_bytes()))
    }

    /// [`Analyzer::is_feature`] of a term whose `hash64` is `hash`: a caller
    /// that hashes its terms anyway (term statistics) does not hash twice.
    pub fn is_feature_hashed(&self, term: &str, hash: u64) -> bool {
        term.chars().any(is_letter_or_digit)
            && !self.stopwords.contains_hashed(term, hash)
    }

    /// Whether `term` is, or contains, a signal word.
    pub fn has_signal_word(&self, term: &str) -> bool {
        self.signal_words.found_in(term)
    }

    /// Append the features of already normalised `text` to `out`.
    /// `with_pos` asks for real POS tags (slower); without it every tag is `x`.
    pub fn tokens<'a>(&'a self, text: &'a str, mode: Mode, with_pos: bool, out: &mut Vec<Token<'a>>) {
        let start = out.len();
        self.words(text, mode, with_pos, out);
        let mut index = 0;
        out.retain(|t| {
            index += 1;
            index <= start || self.is_feature(t.term)
        });
    }

    /// Append every word of already normalised `text` to `out`, stop words
    /// and punctuation included: [`Analyzer::tokens`] before its filter, for
    /// a caller that tests each distinct word once
    /// ([`Analyzer::is_feature_hashed`]) rather than every occurrence.
    pub fn words<'a>(&'a self, text: &'a str, mode: Mode, with_pos: bool, out: &mut Vec<Token<'a>>) {
        match mode {
            Mode::Chars(n) => char_ngrams(text, n, out),
            _ if !text.chars().any(is_han) => word_boundaries(text, out),
            Mode::Precise if with_pos => out.extend(
                self.jieba.tag(text, true).into_iter().map(|t| Token { term: t.word, pos: t.tag }),
            ),
            Mode::Precise => out.extend(
                self.jieba.cut(text, true).into_iter().map(|t| Token { term: t.word, pos: "x" }),
            ),
            Mode::Full | Mode::Search => {
                let words = if mode == Mode::Full {
                    full_mode_words(self.jieba.cut_all(text))
                } else {
                    self.jieba.cut_for_search(text, true)
                };
                if with_pos {
                    // Full and search modes have no tagger of their own: take
                    // the tag precise mode gives a word, else tag the word alone.
                    let tagged: HashMap<&str, &str> =
                        self.jieba.tag(text, true).into_iter().map(|t| (t.word, t.tag)).collect();
                    out.extend(words.into_iter().map(|w| Token {
                        term: w.word,
                        pos: tagged.get(w.word).copied().unwrap_or_else(|| self.tag_word(w.word)),
                    }));
                } else {
                    out.extend(words.into_iter().map(|w| Token { term: w.word, pos: "x" }));
                }
            }
        }
    }

    /// [`Analyzer::words`] for term statistics, which need a word's tag only
    /// for its POS factor. In precise mode with tags, on Chinese text, the
    /// words come from jieba-rs's `cut`, untagged (`x`), and the answer is
    /// `true`: each word's factor is then looked up
    /// ([`Analyzer::find_or_learn_pos_factors`]) or learned ([`Analyzer::tag_in_place`]),
    /// once a word (learned_tags.rs).
    pub fn words_untagged<'a>(&'a self, text: &'a str, mode: Mode, with_pos: bool, out: &mut Vec<Token<'a>>) -> bool {
        if !(with_pos && mode == Mode::Precise) {
            self.words(text, mode, with_pos, out);
            return false;
        }
        // Text without Chinese is scanned for it once, here, not again in `words`.
        if !text.chars().any(is_han) {
            word_boundaries(text, out);
            return false;
        }
        out.extend(self.jieba.cut(text, true).into_iter().map(|t| Token { term: t.word, pos: "x" }));
        true
    }

    /// This analyzer's recent POS factors on this thread, in `recent`
    /// (learned_tags.rs).
    pub(super) fn recent_pos_factors<'r>(&self, recent: &'r mut Option<RecentFactors>) -> &'r mut RecentFactors {
        self.learned.recent(recent)
    }

    /// The POS factors of `wanted` words, none of them in `recent`: known to
    /// the analyzer, else `learn`ed from the caller's index of the word (by
    /// [`Analyzer::tag_in_place`]) and remembered.
    pub(super) fn find_or_learn_pos_factors(&self, recent: &mut RecentFactors, wanted: &mut [Wanted], learn: impl Fn(usize) -> u8) {
        self.learned.find_or_learn(recent, wanted, learn);
    }

    /// How many words' POS factors the analyzer has learned.
    pub fn learned_words(&self) -> usize {
        self.learned.len()
    }

    /// jieba-rs's tag of `word`, a word of `text` as `cut` cuts it (a slice
    /// of `text`): `tag`'s of the word alone when alone it is one word, else
    /// of the run of characters around it, which `tag` cuts as it cuts the
    /// text; else (not seen on two corpora) of the whole text. `x` for a
    /// `word` that is not a word of `text`.
    pub fn tag_in_place<'a>(&'a self, text: &'a str, word: &'a str) -> &'a str {
        if let [alone] = self.jieba.tag(word, true).as_slice() {
            return alone.tag;
        }
        let start = (word.as_ptr() as usize).checked_sub(text.as_ptr() as usize);
        let Some(start) = start.filter(|&s| text.get(s..s + word.len()).is_some()) else {
            return "x";
        };
        let at = start..start + word.len();
        let run = run_around(text, at.clone());
        let tagged = |within: &'a str, offset: usize| {
            let mut tags = self.jieba.tag(within, true).into_iter();
            tags.find(|t| offset + t.byte_start == at.start && offset + t.byte_end == at.end).map(|t| t.tag)
        };
        tagged(&text[run.clone()], run.start).or_else(|| tagged(text, 0)).unwrap_or("x")
    }

    /// `text` split into words that cover it whole, spaces and punctuation
    /// included: jieba's words where there is Chinese, Unicode word
    /// boundaries elsewhere. For showing differences by word (report.html),
    /// not for fingerprints.
    pub fn display_words<'a>(&self, text: &'a str) -> Vec<&'a str> {
        if text.chars().any(is_han) {
            self.jieba.cut(text, true).into_iter().map(|t| t.word).collect()
        } else {
            use unicode_segmentation::UnicodeSegmentation;
            text.split_word_bounds().collect()
        }
    }

    fn tag_word<'a>(&'a self, word: &'a str) -> &'a str {
        match self.jieba.tag(word, false).as_slice() {
            [only] => only.tag,
            _ => "x",
        }
    }
}

/// Load jieba-rs's model of parts of speech, which it reads on the first tag
/// of a word not in its dictionary, once a process, behind a lock. Left to the
/// statement that segments, it held one thread and made the other wait for
/// it as soon as both learned their first new word (27–40 ms); loaded after
/// the dictionary, it fills the time the reading of the documents leaves
/// (their one row group is read by one thread). A dictionary-less `Jieba`
/// knows no word, so every character is one it must guess.
fn load_pos_model() {
    Jieba::empty().tag("词", false);
}

/// jieba-rs's full mode also emits every single character; like the
/// reference jieba, keep a single character only where no longer word covers it.
fn full_mode_words(words: Vec<jieba_rs::Token<'_>>) -> Vec<jieba_rs::Token<'_>> {
    let chars = words.iter().map(|w| w.end).max().unwrap_or(0);
    let mut covered = vec![false; chars];
    for w in words.iter().filter(|w| w.end - w.start > 1) {
        covered[w.start..w.end].iter_mut().for_each(|c| *c = true);
    }
    words.into_iter().filter(|w| w.end - w.start > 1 || !covered[w.start]).collect()
}

/// Reuse a token buffer's allocation for tokens of another lifetime (the
/// next row's text). The vector is emptied; no token outlives its text.
pub fn recycle<'b>(mut tokens: Vec<Token<'_>>) -> Vec<Token<'b>> {
    tokens.clear();
    tokens.into_iter().map(|_| unreachable!("the vector is empty")).collect()
}

/// Han ideographs, the characters jieba segments.
pub fn is_han(c: char) -> bool {
    matches!(c as u32,
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2EBEF | 0x2F800..=0x2FA1F)
}

/// `c.is_alphanumeric()`, answered without Unicode's tables for the
/// characters of Chinese text: ASCII, the unified Han block (letters), and
/// its punctuation and symbols (。、“”《》—★→…, neither), where the tables
/// cost 330 instructions a character. The test compares every code point.
#[inline]
pub fn is_letter_or_digit(c: char) -> bool {
    match c as u32 {
        0..=0x7F => c.is_ascii_alphanumeric(),
        0x4E00..=0x9FFF => true,
        0x2000..=0x206F | 0x2190..=0x245F | 0x2500..=0x2775 | 0x2794..=0x27BF | 0x3000..=0x3004 | 0x3008..=0x3020 => false,
        0x1F300..=0x1FAFF => false,
        _ => c.is_alphanumeric(),
    }
}

fn word_boundaries<'a>(text: &'a str, out: &mut Vec<Token<'a>>) {
    out.extend(text.unicode_words().map(|w| Token {
        term: w,
        pos: if w.chars().all(|c| c.is_numeric() || c == '.' || c == ',') {
            "m"
        } else if w.chars().any(char::is_alphabetic) {
            "eng"
        } else {
            "x"
        },
    }));
}

fn char_ngrams<'a>(text: &'a str, n: usize, out: &mut Vec<Token<'a>>) {
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
    let chars = bounds.len() - 1;
    if chars == 0 {
        return;
    }
    if chars < n {
        // A text shorter than one shingle is one feature, not none.
        out.push(Token { term: text, pos: "x" });
        return;
    }
    out.extend((0..=chars - n).map(|i| Token { term: &text[bounds[i]..bounds[i + n]], pos: "x" }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::normalize;

    fn terms(text: &str, mode: Mode) -> Vec<String> {
        let analyzer = Analyzer::get("").unwrap();
        let text = normalize(text);
        let mut out = Vec::new();
        analyzer.tokens(&text, mode, true, &mut out);
        out.iter().map(|t| t.term.to_string()).collect()
    }

    #[test]
    fn a_failed_build_is_tried_again_and_one_analyzer_is_shared() {
        let dir = tempfile::tempdir().unwrap();
        let dict = dir.path().join("user.dict");
        let options = format!("user_dict={}", dict.display());
        // The file is missing: every caller gets the error, naming it.
        Analyzer::build_in_background(&options, false);
        for _ in 0..2 {
            let error = Analyzer::get(&options).err().expect("no dictionary yet");
            assert!(error.contains("user.dict"), "{error}");
        }
        // Once it is there, the next caller builds the analyzer, and callers
        // from other threads, at once, share that one build.
        std::fs::write(&dict, "云计算平台 5 n\n").unwrap();
        let built: Vec<Arc<Analyzer>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4).map(|_| s.spawn(|| Analyzer::get(&options).unwrap())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(built.iter().all(|a| Arc::ptr_eq(a, &built[0])));
        let mut words = Vec::new();
        built[0].words("云计算平台", Mode::Precise, true, &mut words);
        assert_eq!(words.iter().map(|t| (t.term, t.pos)).collect::<Vec<_>>(), [("云计算平台", "n")]);
    }

    #[test]
    fn letters_and_digits_are_those_of_unicode() {
        let differ: Vec<u32> = (0..=0x10FFFFu32).filter_map(char::from_u32).filter(|&c| is_letter_or_digit(c) != c.is_alphanumeric()).map(u32::from).collect();
        assert!(differ.is_empty(), "{differ:x?}");
    }

    #[test]
    fn mode_parsing_round_trips() {
        for s in ["precise", "full", "search", "char-3", "char-16"] {
            assert_eq!(s.parse::<Mode>().unwrap().to_string(), s);
        }
        assert!("char-0".parse::<Mode>().is_err());
        assert!("char-17".parse::<Mode>().is_err());
        let err = "exact".parse::<Mode>().unwrap_err();
        assert!(err.contains("unknown tokenizer 'exact'"), "{err}");
    }

    #[test]
    fn precise_mode_drops_stop_words_and_punctuation() {
        assert_eq!(terms("我们在北京大学学习，很开心！", Mode::Precise), ["北京大学", "学习", "开心"]);
    }

    #[test]
    fn mixed_chinese_latin_digits() {
        let t = terms("苹果发布ＩＰｈｏｎｅ 15，售价5999元", Mode::Precise);
        assert!(t.contains(&"iphone".to_string()), "{t:?}");
        assert!(t.contains(&"15".to_string()), "{t:?}");
        assert!(t.contains(&"5999".to_string()), "{t:?}");
        assert!(t.contains(&"苹果".to_string()), "{t:?}");
    }

    #[test]
    fn full_mode_emits_overlapping_words() {
        assert_eq!(terms("北京大学", Mode::Full), ["北京", "北京大学", "大学"]);
        // A single character stays where no word covers it.
        assert!(terms("我爱北京", Mode::Full).contains(&"爱".to_string()));
    }

    #[test]
    fn search_mode_adds_sub_words() {
        let t = terms("中华人民共和国", Mode::Search);
        assert!(t.contains(&"中华人民共和国".to_string()) && t.contains(&"人民".to_string()), "{t:?}");
    }

    #[test]
    fn non_han_text_uses_word_boundaries() {
        assert_eq!(terms("Don't PANIC: it's 42.", Mode::Precise), ["don't", "panic", "42"]);
    }

    #[test]
    fn char_ngrams_skip_punctuation_only_windows() {
        assert_eq!(terms("ab，c", Mode::Chars(2)), ["ab", "b,", ",c"]);
        assert_eq!(terms("？！", Mode::Chars(2)), Vec::<String>::new());
        assert_eq!(terms("x", Mode::Chars(3)), ["x"]);
    }

    #[test]
    fn pos_tags_come_from_jieba() {
        let analyzer = Analyzer::get("").unwrap();
        let mut out = Vec::new();
        analyzer.tokens("我爱北京天安门", Mode::Precise, true, &mut out);
        let tags: Vec<_> = out.iter().map(|t| (t.term, t.pos)).collect();
        assert_eq!(tags, [("爱", "v"), ("北京", "ns"), ("天安门", "ns")]);
    }

    #[test]
    fn built_in_lists_do_not_overlap() {
        let a = Analyzer::get("").unwrap();
        for w in word_list(BUILTIN_SIGNAL_WORDS) {
            assert!(a.is_feature(w), "signal word '{w}' is a stop word");
        }
    }

    #[test]
    fn options_are_validated() {
        assert!(AnalyzerOptions::parse("colour=red").unwrap_err().contains("unknown analyzer option"));
        let o = AnalyzerOptions::parse(" stopwords=/a.txt ; user_dict=/b.txt").unwrap();
        assert_eq!(o.to_options_string(), "user_dict=/b.txt;stopwords=/a.txt");
        let err = Analyzer::new(&AnalyzerOptions { user_dict: Some("/nonexistent/dict.txt".into()), ..Default::default() })
            .unwrap_err();
        assert!(err.contains("/nonexistent/dict.txt"), "{err}");
    }

    #[test]
    fn user_dictionary_changes_segmentation() {
        let dir = tempfile::tempdir().unwrap();
        let dict = dir.path().join("dict.txt");
        std::fs::write(&dict, "近重复检测 100 n\n").unwrap();
        let a = Analyzer::new(&AnalyzerOptions { user_dict: Some(dict.display().to_string()), ..Default::default() }).unwrap();
        let mut out = Vec::new();
        a.tokens("近重复检测很有用", Mode::Precise, true, &mut out);
        assert_eq!(out[0], Token { term: "近重复检测", pos: "n" });
        // A frequency jieba-rs cannot add to its total is refused, by line;
        // the largest allowed is taken.
        std::fs::write(&dict, format!("近重复检测 100 n\n检测\n超大词 {} n\n", u64::MAX)).unwrap();
        let err = Analyzer::new(&AnalyzerOptions { user_dict: Some(dict.display().to_string()), ..Default::default() }).unwrap_err();
        assert!(err.contains("dict.txt', line 3: frequency 18446744073709551615 is too large"), "{err}");
        std::fs::write(&dict, format!("超大词 {MAX_USER_FREQ} n\n")).unwrap();
        let a = Analyzer::new(&AnalyzerOptions { user_dict: Some(dict.display().to_string()), ..Default::default() }).unwrap();
        a.tokens("超大词很有用", Mode::Precise, true, &mut out);
        assert!(out.contains(&Token { term: "超大词", pos: "n" }), "{out:?}");
    }

    /// Texts whose words jieba-rs cuts in every way: dictionary words,
    /// unknown names and words the HMM joins, Latin letters, digits,
    /// punctuation, `\r\n`, an ideograph of an extension block, emoji.
    const TAG_TEXTS: [&str; 6] = [
        "我爱北京天安门，今天天气不错！",
        "小明硕士毕业于中国科学院计算所，后在日本京都大学深造",
        "韩冰冰和李易峰在2024年的Steam夏促买了《艾尔登法环》DLC+3个皮肤，花了199.5元",
        "他来到了网易杭研大厦\r\n结果：𠀀字与😀表情都在",
        "//@王二麻子: 转发微博 #话题# http://t.cn/abc_12-3 100%",
        "  ，。！？  好的……",
    ];

    #[test]
    fn a_word_is_tagged_in_place_as_tag_tags_the_whole_text() {
        // A fresh analyzer: nothing learned yet.
        let analyzer = Analyzer::new(&AnalyzerOptions::default()).unwrap();
        for text in TAG_TEXTS {
            let expected: Vec<(&str, &str)> = analyzer.jieba.tag(text, true).into_iter().map(|t| (t.word, t.tag)).collect();
            let mut words = Vec::new();
            assert!(analyzer.words_untagged(text, Mode::Precise, true, &mut words), "{text}");
            let in_place: Vec<(&str, &str)> = words.iter().map(|w| (w.term, analyzer.tag_in_place(text, w.term))).collect();
            assert_eq!(in_place, expected, "{text}");
        }
        // Without tags, or without Chinese, words come as before.
        let mut words = Vec::new();
        assert!(!analyzer.words_untagged("plain English text", Mode::Precise, true, &mut words));
        assert!(!analyzer.words_untagged(TAG_TEXTS[0], Mode::Precise, false, &mut words));
        assert_eq!(analyzer.tag_in_place(TAG_TEXTS[0], "天气不错的一天"), "x", "not a word of the text");
    }

}
