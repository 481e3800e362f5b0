//! Each profile's own bot identity (its open_id), resolved once at start: from the
//! config, else from the bot info API. Never looked up per message. While unknown, group
//! messages are neither captured nor acted on (fail closed).

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
    time::Duration,
};

use tokio_util::sync::CancellationToken;

use crate::{config::Config, feishu_api::FeishuClient};

/// Known bot open_ids by profile name.
#[derive(Debug, Default)]
pub struct Identities {
    map: RwLock<HashMap<String, String>>,
}

impl Identities {
    /// This profile's bot open_id, if known.
    pub fn get(&self, profile: &str) -> Option<String> {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(profile)
            .cloned()
    }

    fn set(&self, profile: &str, open_id: String) {
        self.map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(profile.to_string(), open_id);
    }

    /// Takes configured ids, asks the API for the others (bounded), and keeps retrying
    /// the ones still unknown in the background until `stop`.
    pub async fn resolve(
        self: &Arc<Self>,
        config: &Config,
        clients: &HashMap<String, Arc<FeishuClient>>,
        stop: CancellationToken,
    ) {
        let mut missing = Vec::new();
        for p in &config.profiles {
            match p.bot_open_id.as_deref().filter(|id| !id.is_empty()) {
                Some(id) => self.set(&p.name, id.to_string()),
                None => missing.push(p.name.clone()),
            }
        }
        let mut still = Vec::new();
        for name in missing {
            if !self.try_resolve(&name, clients).await {
                still.push(name);
            }
        }
        if still.is_empty() {
            return;
        }
        let me = self.clone();
        let clients = clients.clone();
        tokio::spawn(async move {
            while !still.is_empty() {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(30)) => {}
                }
                let mut next = Vec::new();
                for name in still {
                    if !me.try_resolve(&name, &clients).await {
                        next.push(name);
                    }
                }
                still = next;
            }
        });
    }

    async fn try_resolve(
        &self,
        profile: &str,
        clients: &HashMap<String, Arc<FeishuClient>>,
    ) -> bool {
        let Some(client) = clients.get(profile) else {
            return false;
        };
        match tokio::time::timeout(Duration::from_secs(5), client.bot_open_id()).await {
            Ok(Ok(id)) => {
                tracing::info!(profile, bot_open_id = %id, "bot identity resolved");
                self.set(profile, id);
                true
            }
            Ok(Err(e)) => {
                tracing::warn!(profile, error = %e, "bot identity unknown: group messages are not captured until it is (set bot_open_id or app_secret)");
                false
            }
            Err(_) => {
                tracing::warn!(
                    profile,
                    "bot identity lookup timed out: group messages are not captured until it resolves"
                );
                false
            }
        }
    }
}
