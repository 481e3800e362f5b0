//! Slash commands, parsed from the request text after this bot's mention is removed.

/// A recognised command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/help`
    Help,
    /// `/status`: keeps pending history.
    Status,
    /// `/new`: new session, history scope cleared.
    New,
    /// `/reset`: same as `/new`.
    Reset,
    /// `/stop`: cancels the running turn of the caller's session.
    Stop,
    /// `/sessions`: this profile's sessions in this chat.
    Sessions,
    /// Anything else starting with `/`: answered with help, never forwarded.
    Unknown(String),
}

impl Command {
    /// Parses `text`; `None` when it is not a command.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let rest = text.strip_prefix('/')?;
        let name = rest
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_lowercase();
        if name.is_empty() {
            return None;
        }
        Some(match name.as_str() {
            "help" => Self::Help,
            "status" => Self::Status,
            "new" => Self::New,
            "reset" => Self::Reset,
            "stop" => Self::Stop,
            "sessions" => Self::Sessions,
            _ => Self::Unknown(format!("/{name}")),
        })
    }

    /// The command as typed (`/status`, or the unknown one).
    pub fn name(&self) -> &str {
        match self {
            Self::Help => "/help",
            Self::Status => "/status",
            Self::New => "/new",
            Self::Reset => "/reset",
            Self::Stop => "/stop",
            Self::Sessions => "/sessions",
            Self::Unknown(n) => n,
        }
    }
}

/// The help text every unknown command also gets.
pub const HELP: &str = "Commands:\n\
/help — this list\n\
/status — this session: id, pending context, running turn\n\
/new — start a new session (forgets the pending group history)\n\
/reset — same as /new\n\
/stop — stop the running answer of this session\n\
/sessions — sessions of this bot in this chat\n\
Anything else is sent to the agent as your request.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_case_insensitively_with_arguments() {
        assert_eq!(Command::parse(" /Status please"), Some(Command::Status));
        assert_eq!(Command::parse("/new"), Some(Command::New));
        assert_eq!(
            Command::parse("/deploy prod"),
            Some(Command::Unknown("/deploy".into()))
        );
        assert_eq!(Command::parse("run /status"), None);
        assert_eq!(Command::parse("/"), None);
    }
}
