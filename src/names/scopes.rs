//! Scopes Feishu refused, per profile: logged once when first refused, shown in
//! `/status` with the scope to add, and left alone until the time to live is over (or
//! the bridge restarts).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
};

use serde::Serialize;
use utoipa::ToSchema;

use super::Names;
use crate::{
    feishu_api::directory::{CHATS_SCOPE, USERS_SCOPE},
    store::NameKind,
    util::UnixMs,
};

/// The scope looking up `kind` needs.
fn scope(kind: NameKind) -> &'static str {
    match kind {
        NameKind::User => USERS_SCOPE,
        NameKind::Chat => CHATS_SCOPE,
    }
}

/// Refusals: when each (profile, kind) was last refused.
#[derive(Debug, Default)]
pub(super) struct Refused(Mutex<BTreeMap<(String, NameKind), UnixMs>>);

impl Refused {
    /// Records a refusal (logged when it is new).
    pub(super) fn refuse(&self, profile: &str, kind: NameKind, now: UnixMs) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.insert((profile.to_string(), kind), now).is_none() {
            tracing::warn!(
                profile,
                scope = scope(kind),
                "Feishu refused a name lookup for a missing scope: ids are shown instead; add the scope to the app in the developer console"
            );
        }
    }

    /// Forgets a refusal (the scope was granted since).
    pub(super) fn clear(&self, profile: &str, kind: NameKind) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.remove(&(profile.to_string(), kind)).is_some() {
            tracing::info!(
                profile,
                scope = scope(kind),
                "the scope is granted now: names are looked up again"
            );
        }
    }

    /// Whether a refusal of (profile, kind) younger than `ttl_ms` stands.
    pub(super) fn blocks(&self, profile: &str, kind: NameKind, now: UnixMs, ttl_ms: i64) -> bool {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(profile.to_string(), kind))
            .is_some_and(|at| now.0.saturating_sub(at.0) < ttl_ms)
    }

    fn of(&self, profile: &str) -> Vec<&'static str> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.keys()
            .filter(|(p, _)| p == profile)
            .map(|(_, k)| scope(*k))
            .collect()
    }
}

/// `names` of `/status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NamesStatusBody {
    /// `names.enabled`.
    pub enabled: bool,
    /// Ids waiting for a lookup (this replica's).
    pub pending: usize,
    /// Every configured profile, in config order.
    pub profiles: Vec<NamesStatus>,
}

/// One profile's names in `/status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NamesStatus {
    pub profile: String,
    /// Names cached (null when the database did not answer).
    pub cached: Option<i64>,
    /// Scopes Feishu refused: names of that kind are shown as ids.
    pub missing_scopes: Vec<String>,
    /// What to do about each missing scope.
    pub hints: Vec<String>,
}

impl Names {
    /// Every configured profile's names, given the cached counts (`None`: unread).
    pub fn status(
        &self,
        profiles: &[String],
        counts: Option<Vec<(String, i64)>>,
    ) -> NamesStatusBody {
        let counts: Option<HashMap<String, i64>> = counts.map(|c| c.into_iter().collect());
        let profiles = profiles
            .iter()
            .map(|p| {
                let missing = self.refused.of(p);
                NamesStatus {
                    profile: p.clone(),
                    cached: counts.as_ref().map(|c| c.get(p).copied().unwrap_or(0)),
                    hints: missing
                        .iter()
                        .map(|s| {
                            format!(
                                "add the scope {s} to the app of profile {p} in the Feishu developer console (and publish a version); ids are shown until then"
                            )
                        })
                        .collect(),
                    missing_scopes: missing.into_iter().map(String::from).collect(),
                }
            })
            .collect();
        NamesStatusBody {
            enabled: self.config.enabled,
            pending: self.pending(),
            profiles,
        }
    }
}
