//! The runner every target shares: the case count from the environment, failures
//! persisted to a committed file per target, and the seed corpus replayed before any
//! random case.

use std::{fmt::Debug, path::PathBuf};

use proptest::{
    strategy::Strategy,
    test_runner::{Config, FileFailurePersistence, TestCaseError, TestError, TestRunner},
};
use serde_json::Value;

/// Random cases per property unless `FEISHU_BRIDGE_FUZZ_CASES` says otherwise: enough to
/// exercise every branch in `cargo test`, small enough to keep the binary a few seconds
/// long in a debug build.
const DEFAULT_CASES: u32 = 256;

/// The file a target's failing seeds are appended to (and replayed from), beside this
/// binary's sources. A `concat!` of the manifest directory, so it is `'static` and works
/// from any working directory.
#[macro_export]
macro_rules! regressions {
    ($target:literal) => {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fuzz/regressions/",
            $target,
            ".txt"
        )
    };
}

/// Cases per property: `FEISHU_BRIDGE_FUZZ_CASES`, else [`DEFAULT_CASES`].
pub fn cases() -> u32 {
    match std::env::var("FEISHU_BRIDGE_FUZZ_CASES") {
        Ok(n) => n
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("FEISHU_BRIDGE_FUZZ_CASES={n:?} is not a number")),
        Err(_) => DEFAULT_CASES,
    }
}

/// Runs `check` on every seed, then on the persisted failing seeds of `regressions`,
/// then on [`cases`] random values of `strategy`; panics with the smallest failing
/// input found.
pub fn fuzz<S>(
    regressions: &'static str,
    seeds: Vec<S::Value>,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: Debug + Clone,
{
    for seed in seeds {
        if let Err(e) = check(seed.clone()) {
            panic!("a corpus input fails: {e}\ninput: {seed:#?}");
        }
    }
    let config = Config {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..Config::default()
    };
    match TestRunner::new(config).run(&strategy, check) {
        Ok(()) => {}
        Err(TestError::Fail(why, input)) => {
            panic!("{why}\nminimal failing input: {input:#?}")
        }
        Err(TestError::Abort(why)) => panic!("the run was aborted: {why}"),
    }
}

/// The entries of `tests/fuzz/corpus/<target>.json` (an array of objects, each with a
/// `note` saying why it is there).
pub fn corpus(target: &str) -> Vec<Value> {
    let path = fuzz_dir().join("corpus").join(format!("{target}.json"));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let entries: Vec<Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for entry in &entries {
        assert!(
            entry["note"].is_string(),
            "every corpus entry has a note: {entry}"
        );
    }
    entries
}

/// The bytes of a corpus entry: `hex` when present, else the UTF-8 of `text`.
pub fn entry_bytes(entry: &Value) -> Vec<u8> {
    if let Some(hex) = entry["hex"].as_str() {
        let digits: String = hex.split_whitespace().collect();
        return hex::decode(digits).unwrap_or_else(|e| panic!("corpus hex: {e}: {entry}"));
    }
    let text = entry["text"].as_str();
    text.unwrap_or_else(|| panic!("a corpus entry needs hex or text: {entry}"))
        .as_bytes()
        .to_vec()
}

/// The shared Feishu test vectors (the same file the integration tests replay).
pub fn vectors() -> Vec<Value> {
    let text = include_str!("../fixtures/feishu-vectors.json");
    serde_json::from_str(text).expect("the vectors parse")
}

/// The SDK-encoded long-connection frames: (name, bytes).
pub fn sdk_frames() -> Vec<(String, Vec<u8>)> {
    let file: Value = serde_json::from_str(include_str!("../fixtures/pbbp2-frames.json"))
        .expect("the frame fixture parses");
    let frames = file["frames"].as_array().expect("frames");
    frames
        .iter()
        .map(|f| {
            let name = f["name"].as_str().expect("name").to_string();
            let bytes = hex::decode(f["hex"].as_str().expect("hex")).expect("hex digits");
            (name, bytes)
        })
        .collect()
}

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fuzz")
}
