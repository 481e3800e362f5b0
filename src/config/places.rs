//! Where keys are written in the TOML text, for problems found after the parse (which
//! otherwise name only the file): today each profile's `app_id`.

use serde::Deserialize;

use super::{Config, Location};

#[derive(Deserialize)]
struct Text {
    #[serde(default)]
    profiles: Vec<ProfileText>,
}

#[derive(Deserialize)]
struct ProfileText {
    app_id: Option<toml::Spanned<String>>,
}

/// Notes the place of each profile's `app_id` in `text`, which already deserialized
/// into `config`; should it not read again, no place is noted.
pub(super) fn record(config: &mut Config, text: &str) {
    let Ok(read) = toml::from_str::<Text>(text) else {
        return;
    };
    for (profile, raw) in config.profiles.iter_mut().zip(read.profiles) {
        profile.app_id_at = raw.app_id.map(|v| Location::of(text, v.span().start));
    }
}
