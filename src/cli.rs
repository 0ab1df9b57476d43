//! Command-line flags, defined once with their help text, and the mapping
//! from flags to job specs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::Result;
use crate::job::{defaults, Candidates, Columns, DuplicateIds, OnBadFile, FingerprintOptions, JobSpec, JoinOptions, LogFormat, PairsSpec, RunOptions, StoreOptions};
use crate::minhash::MinHashPlan;
use crate::sets::{SharePolicy, Verify};
use crate::distributed::{ExecutorOptions, SchedulerOptions};
use crate::eval::EvalSpec;
use crate::session::{parse_size, EngineOptions, WorkTables};
use crate::shell::{Format, Session};
use crate::storage::InputSpec;
use crate::tls::TlsFiles;
use crate::weight::{IdfFormula, Weighting};

#[derive(Debug, Parser)]
#[command(
    name = "neardup",
    version,
    about = "Find near-duplicate documents in Parquet text archives (SimHash on Apache DataFusion)",
    long_about = "Find near-duplicate documents in Parquet text archives.\n\n\
        neardup segments every document (jieba for Chinese, Unicode words otherwise), weights its \
        terms with an improved TF-IDF over the whole corpus, computes a 64-bit SimHash, finds every \
        pair of fingerprints within a Hamming distance with an exact banded self-join, and groups \
        the pairs into clusters that each keep one representative.\n\n\
        Exit codes: 0 success, 2 bad input or usage (the message names the problem; retrying will \
        not help), 1 any other failure (may succeed when retried)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Fingerprint documents, find near-duplicate pairs and clusters, write them as Parquet.
    Dedup(DedupArgs),
    /// Fingerprint documents only: write fingerprints/ (for `pairs`, SQL, or an IDF model).
    Fingerprint(FingerprintArgs),
    /// Find pairs and clusters in an existing fingerprint table (columns id, simhash, optional source).
    Pairs(PairsArgs),
    /// Run a job described by a TOML file (see jobs/example.toml).
    Run(RunArgs),
    /// Look after a fingerprint store: `info` lists it, `compact` merges its runs.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Run SQL with every neardup function available; with no query, an interactive shell.
    Sql(SqlArgs),
    /// List neardup's SQL functions with their syntax and an example.
    Functions,
    /// Score a run against a ground truth: precision, recall and F1 on pairs
    /// and clusters, adjusted Rand index, recall per slice.
    Eval(EvalArgs),
    /// Draw report.html again from a committed dedup, pairs or store-night output.
    Report(ReportArgs),
    /// Run a Ballista scheduler with every neardup function (for --cluster runs).
    Scheduler(SchedulerArgs),
    /// Run a Ballista executor with every neardup function, attached to a scheduler.
    Executor(ExecutorArgs),
}

impl Command {
    /// How the command logs (plain lines unless asked for JSON).
    pub fn log_format(&self) -> LogFormat {
        match self {
            Command::Dedup(a) => a.fingerprints.output.run.log_format,
            Command::Fingerprint(a) => a.output.run.log_format,
            Command::Pairs(a) => a.output.run.log_format,
            Command::Run(a) => a.run.log_format,
            _ => LogFormat::Plain,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Print the store's runs, segments, documents, bytes, settings, IDF model and lease.
    Info(StoreInfoArgs),
    /// Merge the store's runs (and earlier segments) into one segment sorted by fingerprint,
    /// so that a night opens fewer files. Atomic and idempotent; the newest run stays on its
    /// own (so that it can still be rerun) unless --all. Takes the store's lease.
    Compact(StoreCompactArgs),
}

#[derive(Debug, Args)]
pub struct StoreInfoArgs {
    /// The store (a folder or object-store URL).
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StoreCompactArgs {
    /// The store (a folder or object-store URL).
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// Merge the newest run too (it can then no longer be rerun).
    #[arg(long)]
    pub all: bool,
    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

impl StoreCompactArgs {
    pub fn engine(&self) -> EngineOptions {
        self.engine.options()
    }
}

#[derive(Debug, Args)]
pub struct SchedulerArgs {
    /// Address to listen on (0.0.0.0 for every interface).
    #[arg(long, default_value = "127.0.0.1", value_name = "HOST")]
    pub bind: String,
    /// Port for gRPC from clients and executors.
    #[arg(long, default_value_t = 50050)]
    pub port: u16,
    /// Host name executors reach this scheduler by, to report on their tasks [default: the --bind
    /// address, or localhost when it is 0.0.0.0].
    #[arg(long, value_name = "HOST")]
    pub external_host: Option<String>,
    /// Seconds without a heartbeat after which an executor is declared lost
    /// and its tasks are run again elsewhere (keep it above the executors'
    /// --heartbeat-interval).
    #[arg(long, default_value_t = 180, value_name = "SECS")]
    pub executor_timeout: u64,
    #[command(flatten)]
    pub tls: TlsArgs,
}

impl SchedulerArgs {
    pub fn options(&self) -> SchedulerOptions {
        SchedulerOptions {
            bind: self.bind.clone(),
            port: self.port,
            external_host: self.external_host.clone(),
            executor_timeout_secs: self.executor_timeout,
            tls: self.tls.files(),
        }
    }
}

/// Certificates of a cluster secured with mutual TLS: the same three flags
/// (or variables) for the scheduler, the executors and clients.
#[derive(Debug, Args)]
pub struct TlsArgs {
    /// The cluster's CA certificate (PEM). With --tls-cert and --tls-key, every connection of the
    /// cluster is mutual TLS, and peers must show a certificate this CA signed.
    #[arg(long, value_name = "FILE", env = "NEARDUP_TLS_CA", requires_all = ["tls_cert", "tls_key"], help_heading = "Cluster TLS")]
    pub tls_ca: Option<PathBuf>,
    /// This process's certificate (PEM), for the host name others reach it by, for server and
    /// client use.
    #[arg(long, value_name = "FILE", env = "NEARDUP_TLS_CERT", requires_all = ["tls_ca", "tls_key"], help_heading = "Cluster TLS")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", env = "NEARDUP_TLS_KEY", requires_all = ["tls_ca", "tls_cert"], help_heading = "Cluster TLS")]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The files, when given (clap requires all three together).
    pub fn files(&self) -> Option<TlsFiles> {
        match (&self.tls_ca, &self.tls_cert, &self.tls_key) {
            (Some(ca), Some(cert), Some(key)) => Some(TlsFiles { ca: ca.clone(), cert: cert.clone(), key: key.clone() }),
            _ => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct ExecutorArgs {
    /// The scheduler to attach to.
    #[arg(long, default_value = "localhost:50050", value_name = "HOST:PORT")]
    pub scheduler: String,
    /// Address to listen on (0.0.0.0 for every interface).
    #[arg(long, default_value = "127.0.0.1", value_name = "HOST")]
    pub bind: String,
    /// Host name other executors and clients reach this one by [default: as the scheduler sees it].
    #[arg(long, value_name = "HOST")]
    pub external_host: Option<String>,
    /// Arrow Flight port (results and shuffles are fetched from it).
    #[arg(long, default_value_t = 50051)]
    pub port: u16,
    /// gRPC port (the scheduler talks to it).
    #[arg(long, default_value_t = 50052)]
    pub grpc_port: u16,
    /// Tasks run at once [default: number of cores].
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Folder for shuffle and spill files [default: a folder under the system's temp dir].
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<String>,
    /// Memory for the executor's tasks (e.g. 4G) [default: 70 % of the machine's].
    #[arg(long, value_name = "SIZE")]
    pub memory_limit: Option<String>,
    /// Seconds between heartbeats to the scheduler.
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    pub heartbeat_interval: u64,
    #[command(flatten)]
    pub tls: TlsArgs,
}

impl ExecutorArgs {
    pub fn options(&self) -> Result<ExecutorOptions> {
        Ok(ExecutorOptions {
            scheduler: self.scheduler.clone(),
            bind: self.bind.clone(),
            external_host: self.external_host.clone(),
            port: self.port,
            grpc_port: self.grpc_port,
            concurrency: self.concurrency,
            work_dir: self.work_dir.clone(),
            memory_limit: self.memory_limit.as_deref().map(parse_size).transpose()?,
            heartbeat_interval_secs: self.heartbeat_interval,
            tls: self.tls.files(),
        })
    }
}

#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Partitions per plan stage, i.e. parallelism [default: number of cores].
    #[arg(long, value_name = "N", help_heading = "Engine")]
    pub target_partitions: Option<usize>,
    /// Memory for joins, sorts and aggregates (e.g. 2G); beyond it they spill to disk.
    /// Embedded runs only: on a cluster, each executor's own --memory-limit applies.
    #[arg(long, value_name = "SIZE", help_heading = "Engine")]
    pub memory_limit: Option<String>,
    /// Rows per batch [default: 8192].
    #[arg(long, value_name = "ROWS", help_heading = "Engine")]
    pub batch_size: Option<usize>,
    /// Where an embedded run keeps its work tables: auto (in memory without --memory-limit; under
    /// one, in memory when a dedup or fingerprint run's inputs are estimated to fit in it, else
    /// files), memory, or files (in the output's staging folder) [default: auto].
    #[arg(long, value_name = "WHERE", help_heading = "Engine")]
    pub work_tables: Option<WorkTables>,
    /// Run on a Ballista cluster: the scheduler's address [default: embedded, in this process].
    #[arg(long, value_name = "df://HOST:PORT", env = "NEARDUP_CLUSTER", help_heading = "Engine")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
}

impl EngineArgs {
    fn options(&self) -> EngineOptions {
        EngineOptions {
            target_partitions: self.target_partitions,
            memory_limit: self.memory_limit.clone(),
            batch_size: self.batch_size,
            cluster: self.cluster.clone(),
            tls: self.tls.files(),
            work_tables: self.work_tables,
        }
    }
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Output folder; it appears complete (with _SUCCESS) or not at all.
    #[arg(short, long, value_name = "PATH")]
    pub output: String,
    /// Replace the output folder if it exists (otherwise an existing one is an error).
    #[arg(long)]
    pub overwrite: bool,
    /// No progress lines on standard error.
    #[arg(short, long)]
    pub quiet: bool,
    /// Print the summary as JSON on standard output instead of one line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub run: RunControlArgs,
}

/// How a run reports and whether it writes: shared by every command that runs a job.
#[derive(Debug, Args)]
pub struct RunControlArgs {
    /// Check the settings, the inputs and that the outputs can be written, print the plan, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Progress and errors on standard error as plain lines or JSON lines.
    #[arg(long, value_enum, default_value_t = LogFormat::default(), value_name = "FORMAT", env = "NEARDUP_LOG_FORMAT")]
    pub log_format: LogFormat,
}

impl RunControlArgs {
    pub fn options(&self, quiet: bool) -> RunOptions {
        RunOptions { quiet, dry_run: self.dry_run, log_format: self.log_format }
    }
}

#[derive(Debug, Args)]
pub struct StoreArgs {
    /// Nightly runs: dedup the inputs against this fingerprint store (a folder or object-store URL)
    /// and append them to it as run RUN_ID; created on the first run.
    #[arg(long, value_name = "URL", help_heading = "Store", requires = "run_id")]
    pub store: Option<String>,
    /// This run's id in the store (e.g. the crawl's date); rerunning an id replaces its run.
    /// '{run_id}' in --input and --output paths is replaced by it.
    #[arg(long, value_name = "ID", env = "NEARDUP_RUN_ID", help_heading = "Store")]
    pub run_id: Option<String>,
}

#[derive(Debug, Args)]
pub struct JoinArgs {
    /// Largest Hamming distance (of 64 bits) that makes two documents near duplicates.
    #[arg(short = 'k', long, default_value_t = defaults::MAX_HAMMING, value_name = "K", help_heading = "Join")]
    pub max_hamming: u32,
    /// Blocks the 64 bits are cut into for the banded join (more than K) [default: chosen from the corpus size].
    #[arg(long, value_name = "M", help_heading = "Join")]
    pub band_blocks: Option<u32>,
    /// Where candidate pairs come from: fingerprints within K (the SimHash banded join),
    /// term sets sharing a MinHash LSH band, or both.
    #[arg(long, value_enum, default_value_t = Candidates::default(), help_heading = "Join")]
    pub candidates: Candidates,
    /// MinHash bands × rows, when candidates include MinHash.
    #[arg(long, default_value_t = MinHashPlan::default(), value_name = "BxR", value_parser = parse_minhash, help_heading = "Join")]
    pub minhash: MinHashPlan,
    /// Check candidates: on their term sets with jaccard:T or overlap:T (overlap coefficient), on their SimHash vectors with cosine:T (SimHash-cosine), or none (SimHash candidates only).
    #[arg(long, default_value_t = defaults::VERIFY, value_name = "CHECK", value_parser = parse_verify, help_heading = "Join")]
    pub verify: Verify,
    /// Duplication policy: keep a checked pair only when at least this share of the shorter
    /// document's text (its runs of five words, or of five characters in Chinese) is found in
    /// the other; none leaves it to the check [default: 0.7 with a check; a store's own policy].
    #[arg(long, value_name = "S|none", value_parser = parse_min_shared, help_heading = "Join")]
    pub min_shared: Option<SharePolicy>,
    /// Representative of each cluster: smallest-id, longest, earliest:COLUMN or latest:COLUMN.
    #[arg(long, default_value = defaults::KEEP, value_name = "RULE", help_heading = "Join")]
    pub keep: String,
}

fn parse_minhash(s: &str) -> std::result::Result<MinHashPlan, String> {
    s.parse()
}

fn parse_verify(s: &str) -> std::result::Result<Verify, String> {
    s.parse()
}

fn parse_min_shared(s: &str) -> std::result::Result<SharePolicy, String> {
    s.parse()
}

impl JoinArgs {
    fn options(&self) -> JoinOptions {
        JoinOptions {
            max_hamming: self.max_hamming,
            blocks: self.band_blocks,
            candidates: self.candidates,
            minhash: self.minhash,
            verify: self.verify,
            min_shared: self.min_shared.unwrap_or_default(),
        }
    }
}

#[derive(Debug, Args)]
pub struct FingerprintArgs {
    /// Input Parquet dataset: a file, folder or glob, optionally named (NAME=URL); repeat for more.
    /// The name becomes the documents' `source` [default: the file or folder name].
    #[arg(short, long = "input", value_name = "[NAME=]URL", required = true)]
    pub inputs: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Column holding the document id (unique within an input).
    #[arg(long, default_value = defaults::ID_COLUMN, value_name = "COLUMN", help_heading = "Columns")]
    pub id_col: String,
    /// Column holding the document text.
    #[arg(long, default_value = defaults::TEXT_COLUMN, value_name = "COLUMN", help_heading = "Columns")]
    pub text_col: String,
    /// Column holding the title (its terms weigh more) [default: `title` if present; '' for none].
    #[arg(long, value_name = "COLUMN", help_heading = "Columns")]
    pub title_col: Option<String>,
    /// Rows repeating an id within an input: refuse the input, or keep one (the smallest text) and count the rest.
    #[arg(long, value_enum, default_value_t = DuplicateIds::default(), value_name = "WHAT", help_heading = "Columns")]
    pub duplicate_ids: DuplicateIds,
    /// An input file that is damaged or has drifted (its id or text column missing or retyped):
    /// refuse the run, or leave the file out, name it in the summary and exit 3 (done, but partial).
    #[arg(long, value_enum, default_value_t = OnBadFile::default(), value_name = "WHAT", help_heading = "Columns")]
    pub on_bad_file: OnBadFile,
    /// Tokenizer: precise (jieba exact mode), full, search, or char-N (character N-grams).
    #[arg(long, default_value = defaults::TOKENIZER, value_name = "MODE", help_heading = "Fingerprints")]
    pub tokenizer: String,
    /// Term weighting: none, tf, tfidf, improved (tf·idf·(1 + POS + length + signal + title)),
    /// or improved:F+F… with only the factors named (pos, length, signal, title).
    #[arg(long, default_value_t = Weighting::default(), value_name = "WEIGHTING", value_parser = parse_weighting, help_heading = "Fingerprints")]
    pub weighting: Weighting,
    /// IDF formula.
    #[arg(long, value_enum, default_value_t = IdfFormula::default(), help_heading = "Fingerprints")]
    pub idf: IdfFormula,
    /// jieba user dictionary (lines of `word [freq] [tag]`).
    #[arg(long, value_name = "FILE", help_heading = "Fingerprints")]
    pub user_dict: Option<String>,
    /// Stop words replacing the built-in list (one per line).
    #[arg(long, value_name = "FILE", help_heading = "Fingerprints")]
    pub stopwords: Option<String>,
    /// Signal words replacing the built-in list (one per line).
    #[arg(long, value_name = "FILE", help_heading = "Fingerprints")]
    pub signal_words: Option<String>,
    /// Use document frequencies from a saved IDF model instead of this corpus.
    #[arg(long, value_name = "FILE", help_heading = "Fingerprints")]
    pub idf_model: Option<String>,
    /// Save this corpus's document frequencies as an IDF model (Parquet: hash, term, df).
    #[arg(long, value_name = "FILE", help_heading = "Fingerprints")]
    pub save_idf_model: Option<String>,
    /// Only the K heaviest terms of each document vote in its SimHash [default: all terms].
    #[arg(long, value_name = "K", help_heading = "Fingerprints")]
    pub top_k: Option<u32>,
    /// Drop short lines that occur in at least N documents (site boilerplate) before segmentation;
    /// 0 turns it off [default: 10; a store's own rule].
    #[arg(long, value_name = "N", help_heading = "Fingerprints")]
    pub boilerplate_lines: Option<u32>,
    /// Drop the lines of this frozen set (a store's idf/boilerplate.parquet) instead of counting
    /// them over this run's documents; give the --boilerplate-lines it was counted with.
    #[arg(long, value_name = "FILE", help_heading = "Fingerprints")]
    pub boilerplate_set: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct DedupArgs {
    #[command(flatten)]
    pub fingerprints: FingerprintArgs,
    #[command(flatten)]
    pub join: JoinArgs,
    /// Also write the surviving input rows (all columns) under survivors/SOURCE/.
    #[arg(long)]
    pub survivors: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

fn parse_weighting(s: &str) -> std::result::Result<Weighting, String> {
    s.parse()
}

impl FingerprintArgs {
    /// The run's spec, with the default join settings.
    pub fn spec(&self) -> Result<JobSpec> {
        Ok(JobSpec {
            inputs: self.inputs.iter().map(|s| InputSpec::parse(s)).collect::<Result<_>>()?,
            output: self.output.output.clone(),
            overwrite: self.output.overwrite,
            columns: Columns {
                id: self.id_col.clone(),
                text: self.text_col.clone(),
                title: self.title_col.clone(),
                duplicate_ids: self.duplicate_ids,
                on_bad_file: self.on_bad_file,
            },
            fingerprint: FingerprintOptions {
                tokenizer: self.tokenizer.clone(),
                weighting: self.weighting,
                idf: self.idf,
                user_dict: self.user_dict.clone(),
                stopwords: self.stopwords.clone(),
                signal_words: self.signal_words.clone(),
                idf_model: self.idf_model.clone(),
                save_idf_model: self.save_idf_model.clone(),
                top_k: self.top_k,
                boilerplate_lines: self.boilerplate_lines,
                boilerplate_set: self.boilerplate_set.clone(),
            },
            join: JoinOptions::default(),
            keep: defaults::KEEP.into(),
            survivors: false,
            engine: self.engine.options(),
            store: None,
        })
    }
}

impl DedupArgs {
    pub fn spec(&self) -> Result<JobSpec> {
        let mut spec = JobSpec {
            join: self.join.options(),
            keep: self.join.keep.clone(),
            survivors: self.survivors,
            store: self.store.store.clone().map(|url| StoreOptions { url, run_id: None }),
            ..self.fingerprints.spec()?
        };
        spec.apply_run_id(self.store.run_id.clone())?;
        Ok(spec)
    }
}

#[derive(Debug, Args)]
pub struct PairsArgs {
    /// Fingerprint table (Parquet file, folder or glob), e.g. the fingerprints/ of a dedup run.
    #[arg(short, long, value_name = "[NAME=]URL")]
    pub fingerprints: String,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub join: JoinArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

impl PairsArgs {
    pub fn spec(&self) -> Result<PairsSpec> {
        Ok(PairsSpec {
            fingerprints: InputSpec::parse(&self.fingerprints)?,
            output: self.output.output.clone(),
            overwrite: self.output.overwrite,
            join: self.join.options(),
            keep: self.join.keep.clone(),
            engine: self.engine.options(),
        })
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Job file (TOML); relative paths in it are relative to its folder.
    pub job: PathBuf,
    /// Replace the output folder if it exists (overrides the file's `overwrite`).
    #[arg(long)]
    pub overwrite: bool,
    /// No progress lines on standard error.
    #[arg(short, long)]
    pub quiet: bool,
    /// Print the summary as JSON on standard output instead of one line.
    #[arg(long)]
    pub json: bool,
    /// Run on a Ballista cluster (overrides the file's engine.cluster).
    #[arg(long, value_name = "df://HOST:PORT", env = "NEARDUP_CLUSTER")]
    pub cluster: Option<String>,
    /// Certificates for a cluster with mutual TLS (override the file's engine.tls).
    #[command(flatten)]
    pub tls: TlsArgs,
    /// The run id of a store run (overrides the file's store.run_id).
    #[arg(long, value_name = "ID", env = "NEARDUP_RUN_ID")]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub run: RunControlArgs,
}


#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The output (a folder or object-store URL) of a dedup, pairs or store run.
    #[arg(value_name = "OUTPUT")]
    pub output: String,
    /// Where to write the page (a path or object-store URL).
    #[arg(short = 'o', long = "out", value_name = "FILE", default_value = "report.html")]
    pub out: String,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Ground truth (Parquet, or CSV by extension): pairs with columns source_a, id_a, source_b,
    /// id_b (and a slice column), or groups with columns source, id, cluster.
    #[arg(long, value_name = "URL")]
    pub truth: String,
    /// What to score: a dedup/pairs output folder, or a table of pairs.
    #[arg(long, value_name = "URL")]
    pub predicted: String,
    /// The corpus's documents (columns source, id) [default: the output's fingerprints/].
    #[arg(long, value_name = "URL")]
    pub documents: Option<String>,
    /// Column of the truth pairs that names their slice [default: `edit` or `slice` when present].
    #[arg(long, value_name = "COL")]
    pub slice_col: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

impl EvalArgs {
    pub fn spec(&self) -> EvalSpec {
        EvalSpec {
            truth: self.truth.clone(),
            predicted: self.predicted.clone(),
            documents: self.documents.clone(),
            slice_column: self.slice_col.clone(),
        }
    }
}

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// SQL to run (several statements separated by ';').
    #[arg(short = 'c', long = "command", value_name = "SQL", conflicts_with = "file")]
    pub command: Option<String>,
    /// File of SQL statements to run.
    #[arg(short, long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Attach a Parquet file, folder or glob as a table; repeat for more.
    #[arg(short, long = "table", value_name = "NAME=URL")]
    pub tables: Vec<String>,
    /// Output format of query results.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    #[command(flatten)]
    pub engine: EngineArgs,
}

impl SqlArgs {
    pub fn engine(&self) -> EngineOptions {
        self.engine.options()
    }

    /// What the shell runs.
    pub fn session(&self) -> Session {
        Session {
            command: self.command.clone(),
            file: self.file.clone(),
            tables: self.tables.clone(),
            format: self.format,
            engine: self.engine(),
        }
    }
}

/// `clap::ValueEnum` for an enum of the layers below, which know nothing of
/// clap: its values as the command line spells them, each with its help.
macro_rules! value_enum {
    ($type:ident { $($variant:ident => $name:literal $(: $help:literal)?),+ $(,)? }) => {
        impl ValueEnum for $type {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($type::$variant),+]
            }
            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                Some(match self {
                    $($type::$variant => clap::builder::PossibleValue::new($name)$(.help($help))?),+
                })
            }
        }
    };
}

value_enum!(DuplicateIds {
    Error => "error": "Refuse the input (exit code 2), naming the ids",
    KeepFirst => "keep-first": "Keep one row per id (the smallest text, then title), drop the others and count them in the summary",
});

value_enum!(OnBadFile {
    Error => "error": "Refuse the run (exit code 2), naming the file, the column and the type found",
    Skip => "skip": "Leave the file out, name it in summary.json (skipped_files) and the log, and exit 3",
});

value_enum!(Candidates {
    Simhash => "simhash": "Fingerprints within Hamming distance k (the banded self-join)",
    Minhash => "minhash": "Term sets sharing a MinHash LSH band",
    Both => "simhash+minhash": "Both: fingerprints within k, and term sets sharing a MinHash band",
});

value_enum!(LogFormat { Plain => "plain", Json => "json" });

value_enum!(IdfFormula {
    Standard => "standard": "ln(N / df + 0.01)",
    DfPlusOne => "df-plus-one": "ln(N / (df + 1)), clamped at 0",
});

value_enum!(Format {
    Table => "table": "Aligned table for people",
    Csv => "csv": "CSV with a header line",
    Json => "json": "One JSON object per row (JSON lines)",
});
