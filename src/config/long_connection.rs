//! Checks of the profiles that receive over the long connection, beyond each one's own
//! fields (which `validate.rs` checks).

use std::collections::HashMap;

use super::{ConfigError, Connection, Profile, problems::Problems};

/// Two websocket profiles of one app would split its events: Feishu hands each event to
/// one connection of the app, chosen at random (cluster mode, no broadcast), so each
/// profile would miss the events the other's connection got. Replicas of one bridge are
/// another matter: they share the database, so an event is stored whichever took it.
pub(super) fn one_per_app(profiles: &[Profile], out: &mut Problems) {
    let mut first: HashMap<&str, &str> = HashMap::new();
    for (i, p) in profiles.iter().enumerate() {
        let app = p.app_id.trim();
        if p.connection != Connection::Websocket || app.is_empty() {
            continue;
        }
        let Some(other) = first.get(app).copied() else {
            first.insert(app, p.name.as_str());
            continue;
        };
        let why = format!(
            "profiles {other:?} and {:?} both take the long connection of app {app} \
             (connection = \"websocket\"): Feishu hands each event to one connection of an \
             app, chosen at random, so each profile would miss some of its events; use one \
             profile per app for the long connection, or receive on the event URL \
             (connection = \"webhook\")",
            p.name
        );
        let problem = ConfigError::new(format!("profiles[{i}].app_id"), why);
        out.push(match p.app_id_at.clone() {
            Some(at) => problem.at(at),
            None => problem,
        });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_app_has_one_websocket_profile_and_the_second_is_shown_where_it_is_written() {
        let profile = |name: &str, app: &str, connection: &str| {
            format!(
                "[[profiles]]\nname = \"{name}\"\napp_id = \"{app}\"\nconnection = \"{connection}\"\n\
                 app_secret = \"s\"\nverification_token = \"t\"\n"
            )
        };
        let text = [
            profile("a", "cli_1", "websocket"),
            profile("b", "cli_1", "webhook"),
            profile("c", "cli_2", "websocket"),
            profile("d", "cli_1", "websocket"),
        ]
        .concat();
        let err = super::super::load_from_str(&text, &|_| None)
            .expect_err("two websocket profiles of cli_1")
            .single();
        assert_eq!(err.key, "profiles[3].app_id");
        assert!(
            err.message
                .starts_with("profiles \"a\" and \"d\" both take the long connection of app cli_1"),
            "{err}"
        );
        assert!(err.message.contains("chosen at random"), "{err}");
        let at = err.at.as_ref().expect("a place");
        assert_eq!((at.line, at.column), (21, 10), "{err}");
        let fine = text.replace(
            "name = \"d\"\napp_id = \"cli_1\"",
            "name = \"d\"\napp_id = \"cli_3\"",
        );
        super::super::load_from_str(&fine, &|_| None).expect("one websocket profile per app");
    }
}
