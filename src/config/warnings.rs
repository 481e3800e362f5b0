//! Settings that are valid but do not do what they say, or whose default is rarely
//! what is meant (a digest run in UTC): reported as warnings (by `check-config` and at
//! `serve` start), never refused.
//!
//! A warning may need to know that a key was written in the file rather than left at
//! its default; [`record_explicit`] notes that from the TOML text at load time.

use super::{Config, DigestPost, GroupScope};

/// Notes which defaulted keys the file sets explicitly (today: `profiles[i].group_scope`).
/// `text` already deserialized into `config`, so it parses; should it not, nothing is noted.
pub(super) fn record_explicit(config: &mut Config, text: &str) {
    let Ok(table) = text.parse::<toml::Table>() else {
        return;
    };
    let Some(profiles) = table.get("profiles").and_then(toml::Value::as_array) else {
        return;
    };
    for (profile, raw) in config.profiles.iter_mut().zip(profiles) {
        profile.group_scope_set = raw
            .as_table()
            .is_some_and(|t| t.contains_key("group_scope"));
    }
}

impl Config {
    /// Settings that are accepted but ignored, or left to a risky default, each naming
    /// its key; empty when none.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, p) in self.profiles.iter().enumerate() {
            // `thread` agrees with thread isolation, so only the other scopes are lost.
            if p.thread_isolation && p.group_scope_set && p.group_scope != GroupScope::Thread {
                out.push(format!(
                    "profiles[{i}].group_scope: ignored while thread_isolation = true (the \
                     default); set thread_isolation = false to use it"
                ));
            }
        }
        out.extend(self.digest.warning());
        let owned = self.workspaces.iter().any(|w| w.owner.is_some());
        if self.digest.enabled && self.digest.post == DigestPost::Owner && !owned {
            out.push(
                "digest.post: \"owner\", but no workspace has an owner, so no digest is posted; \
                 set [[workspaces]] owner, or post = \"chat\""
                    .into(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::load_from_str;

    const PROFILE: &str =
        "[[profiles]]\nname = \"p\"\napp_id = \"a\"\nverification_token = \"t\"\ndry_run = true\n";

    fn warnings(more: &str) -> Vec<String> {
        let text = format!("{PROFILE}{PROFILE}{more}").replacen("\"p\"", "\"q\"", 1);
        load_from_str(&text, &|_| None).expect("valid").warnings()
    }

    #[test]
    fn group_scope_under_thread_isolation_is_a_warning_naming_the_profile() {
        assert_eq!(
            warnings("group_scope = \"per-user\"\n"),
            [
                "profiles[1].group_scope: ignored while thread_isolation = true (the default); \
              set thread_isolation = false to use it"
            ]
        );
        let explicit = warnings("thread_isolation = true\ngroup_scope = \"shared-chat\"\n");
        assert_eq!(explicit.len(), 1, "{explicit:?}");
    }

    #[test]
    fn posting_digests_to_owners_no_workspace_has_is_a_warning() {
        let digest = "[digest]\nenabled = true\ntimezone = \"UTC\"\npost = \"owner\"\n\
                      [digest.summarizer]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n";
        let w = warnings(&format!("\n{digest}"));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("digest.post: \"owner\""), "{w:?}");
        let owned = format!("\n{digest}[[workspaces]]\nchat_id = \"oc_1\"\nowner = \"ou_1\"\n");
        assert_eq!(warnings(&owned), Vec::<String>::new());
    }

    #[test]
    fn no_warning_when_group_scope_is_used_agrees_or_is_left_alone() {
        assert_eq!(warnings(""), Vec::<String>::new());
        assert_eq!(
            warnings("thread_isolation = false\ngroup_scope = \"per-user\"\n"),
            Vec::<String>::new()
        );
        assert_eq!(warnings("group_scope = \"thread\"\n"), Vec::<String>::new());
    }
}
