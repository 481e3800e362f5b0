//! What-if settings: the context settings a stored decision can be re-run under, named
//! as the configuration names them, parsed from `key=value` pairs (the CLI's
//! `--what-if`) or a JSON object (the REST body).

use serde::Deserialize;
use utoipa::ToSchema;

use crate::config::WorkspaceMode;

// The REST body's `settings` is documented by this type and read by `from_json`
// (strings and whole numbers written with a fraction taken too); serde's
// `deny_unknown_fields` tells the schema that no other key is taken.
/// Settings to re-run a decision's selection under, by their configuration keys; one
/// left out (or null) keeps what the decision used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = WhatIfSettings)]
pub struct Overrides {
    /// `context.thread_context_limit` (or a workspace's): the item budget.
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 2147483647)]
    pub thread_context_limit: Option<usize>,
    /// `context.max_context_chars`: the character budget.
    #[schema(value_type = Option<u32>, maximum = 2147483647)]
    pub max_context_chars: Option<usize>,
    /// `context.max_agent_output_chars`: longer agent outputs are cut.
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 2147483647)]
    pub max_agent_output_chars: Option<usize>,
    /// `context.shared_thread_enabled`: the thread context on or off.
    pub shared_thread_enabled: Option<bool>,
    /// `context.group_chat_history_share`: the pending history on or off.
    pub group_chat_history_share: Option<bool>,
    /// A workspace's `mode`: `shared` or `owner_only`.
    #[schema(value_type = Option<String>, pattern = "^(shared|owner_only)$")]
    pub workspace_mode: Option<WorkspaceMode>,
}

/// The keys [`Overrides::parse`] knows, in the order they are listed in errors.
pub const KEYS: [&str; 6] = [
    "thread_context_limit",
    "max_context_chars",
    "max_agent_output_chars",
    "shared_thread_enabled",
    "group_chat_history_share",
    "workspace_mode",
];

impl Overrides {
    /// Parses `key=value` pairs; a key given twice takes its last value.
    pub fn parse(pairs: &[String]) -> Result<Overrides, String> {
        let mut o = Overrides::default();
        for pair in pairs {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!(
                    "what-if setting {pair:?} is not key=value (keys: {})",
                    KEYS.join(", ")
                ));
            };
            o.set(key.trim(), value.trim())?;
        }
        Ok(o)
    }

    /// Parses a JSON object of settings (`{"thread_context_limit": 3, …}`); values may
    /// be JSON numbers, booleans or strings.
    pub fn from_json(
        settings: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, String> {
        let mut o = Overrides::default();
        for (key, value) in settings {
            let text = match value {
                // A null keeps the decision's setting, as leaving the key out does.
                serde_json::Value::Null => continue,
                serde_json::Value::String(s) => s.clone(),
                // JSON does not tell 3 from 3.0: a whole number written with a
                // fraction is still that number.
                serde_json::Value::Number(n) => {
                    whole(n).map_or_else(|| n.to_string(), |w| w.to_string())
                }
                serde_json::Value::Bool(b) => b.to_string(),
                _ => {
                    return Err(format!(
                        "what-if setting {key}: {value} is not a number, boolean or string"
                    ));
                }
            };
            o.set(key, &text)?;
        }
        Ok(o)
    }

    /// Sets one key from its text.
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "thread_context_limit" => self.thread_context_limit = Some(positive(key, value)?),
            "max_context_chars" => self.max_context_chars = Some(count(key, value)?),
            "max_agent_output_chars" => self.max_agent_output_chars = Some(positive(key, value)?),
            "shared_thread_enabled" => self.shared_thread_enabled = Some(flag(key, value)?),
            "group_chat_history_share" => self.group_chat_history_share = Some(flag(key, value)?),
            "workspace_mode" => {
                self.workspace_mode = Some(WorkspaceMode::parse(value).ok_or_else(|| {
                    format!("what-if setting workspace_mode: {value:?} is not shared or owner_only")
                })?);
            }
            _ => {
                return Err(format!(
                    "unknown what-if setting {key:?} (keys: {})",
                    KEYS.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// A JSON number's value when it is a whole number that is not negative.
fn whole(n: &serde_json::Number) -> Option<u64> {
    n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(f))
            .map(|f| f as u64)
    })
}

/// The largest number a setting takes (what the API documents: a 32-bit integer).
pub const MAX_SETTING: usize = i32::MAX as usize;

fn count(key: &str, value: &str) -> Result<usize, String> {
    let n: usize = value
        .parse()
        .map_err(|_| format!("what-if setting {key}: {value:?} is not a whole number"))?;
    if n > MAX_SETTING {
        return Err(format!(
            "what-if setting {key}: must be at most {MAX_SETTING}"
        ));
    }
    Ok(n)
}

fn positive(key: &str, value: &str) -> Result<usize, String> {
    match count(key, value)? {
        0 => Err(format!("what-if setting {key}: must be at least 1")),
        n => Ok(n),
    }
}

fn flag(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "true" | "on" => Ok(true),
        "false" | "off" => Ok(false),
        _ => Err(format!(
            "what-if setting {key}: {value:?} is not true or false"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[&str]) -> Result<Overrides, String> {
        let pairs: Vec<String> = pairs.iter().map(|p| p.to_string()).collect();
        Overrides::parse(&pairs)
    }

    #[test]
    fn every_key_parses() {
        let o = parse(&[
            "thread_context_limit=3",
            "max_context_chars = 500",
            "max_agent_output_chars=40",
            "shared_thread_enabled=false",
            "group_chat_history_share=on",
            "workspace_mode=owner_only",
        ])
        .expect("parses");
        assert_eq!(
            o,
            Overrides {
                thread_context_limit: Some(3),
                max_context_chars: Some(500),
                max_agent_output_chars: Some(40),
                shared_thread_enabled: Some(false),
                group_chat_history_share: Some(true),
                workspace_mode: Some(WorkspaceMode::OwnerOnly),
            }
        );
        assert_eq!(parse(&[]).expect("nothing"), Overrides::default());
        assert_eq!(
            parse(&["max_context_chars=1", "max_context_chars=0"])
                .expect("the last wins")
                .max_context_chars,
            Some(0)
        );
    }

    #[test]
    fn bad_keys_and_values_say_what_is_wrong() {
        let err = parse(&["thread_limit=3"]).expect_err("unknown");
        assert!(
            err.contains("unknown what-if setting \"thread_limit\""),
            "{err}"
        );
        assert!(
            err.contains("thread_context_limit"),
            "lists the keys: {err}"
        );
        let err = parse(&["thread_context_limit"]).expect_err("no value");
        assert!(err.contains("not key=value"), "{err}");
        let err = parse(&["thread_context_limit=-1"]).expect_err("negative");
        assert!(err.contains("not a whole number"), "{err}");
        let err = parse(&["thread_context_limit=0"]).expect_err("zero");
        assert!(err.contains("at least 1"), "{err}");
        let err = parse(&["max_context_chars=2147483648"]).expect_err("too large");
        assert!(err.contains("at most 2147483647"), "{err}");
        assert_eq!(
            parse(&["max_context_chars=2147483647"])
                .expect("the largest")
                .max_context_chars,
            Some(MAX_SETTING)
        );
        let err = parse(&["shared_thread_enabled=maybe"]).expect_err("not a flag");
        assert!(err.contains("not true or false"), "{err}");
        let err = parse(&["workspace_mode=dm"]).expect_err("not a mode");
        assert!(err.contains("shared or owner_only"), "{err}");
    }

    #[test]
    fn json_settings_take_numbers_booleans_and_strings() {
        let v = serde_json::json!({
            "thread_context_limit": 2, "shared_thread_enabled": false, "workspace_mode": "shared"
        });
        let o = Overrides::from_json(v.as_object().expect("object")).expect("parses");
        assert_eq!(o.thread_context_limit, Some(2));
        assert_eq!(o.shared_thread_enabled, Some(false));
        assert_eq!(o.workspace_mode, Some(WorkspaceMode::Shared));
        let bad = serde_json::json!({"thread_context_limit": [1]});
        let err = Overrides::from_json(bad.as_object().expect("object")).expect_err("array");
        assert!(err.contains("thread_context_limit"), "{err}");
        let bad = serde_json::json!({"max_context_chars": 2.5});
        assert!(Overrides::from_json(bad.as_object().expect("object")).is_err());
        let v = serde_json::json!({ "max_context_chars": 37211.0, "thread_context_limit": 2.5 });
        let err = Overrides::from_json(v.as_object().expect("object")).expect_err("2.5");
        assert!(
            err.contains("thread_context_limit") && err.contains("2.5"),
            "{err}"
        );
        let v = serde_json::json!({ "max_context_chars": 37211.0 });
        let o = Overrides::from_json(v.as_object().expect("object")).expect("37211.0 is whole");
        assert_eq!(o.max_context_chars, Some(37211));
    }
}
