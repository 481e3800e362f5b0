//! The words the bridge stores, serves and labels metrics with are its variants' names in
//! snake_case. Renaming a variant would change what is stored and break rows already
//! written, so each vocabulary is pinned here, word for word.

use feishu_bridge::{
    inbox,
    routing::{Reason, Verdict},
    store::{
        AskState, DigestReason, DigestStatus, DigestTrigger, FeedItemState, InboxStatus, ReplyKind,
        SegmentState, TurnState,
    },
    turns,
    vocab::ChatType,
    vocab::kinds::{EventType, Exclusion, ItemType, MediaItemType, Role},
};

#[test]
fn every_stored_vocabulary_keeps_its_spellings() {
    let event_types = [
        "topic_root",
        "human_message",
        "user_request",
        "agent_output",
        "command",
    ];
    assert_eq!(EventType::SPELLINGS, event_types);
    assert_eq!(
        ItemType::SPELLINGS,
        ["topic_root", "human_message", "agent_output"]
    );
    assert_eq!(Role::SPELLINGS, ["human", "bot"]);
    assert_eq!(
        MediaItemType::SPELLINGS,
        ["image", "text_file", "file", "bundle", "doc"]
    );
    let exclusions = [
        "command",
        "recalled",
        "same_turn_request",
        "own_output",
        "other_profile",
        "mode",
        "limit",
        "chars",
        "in_thread_context",
        "topic_root_block",
        "in_feed",
    ];
    assert_eq!(Exclusion::SPELLINGS, exclusions);
    assert_eq!(inbox::Outcome::SPELLINGS, ["done", "retry", "failed"]);
    assert_eq!(ChatType::SPELLINGS, ["p2p", "group"]);
    assert_eq!(Verdict::SPELLINGS, ["ignored", "observed", "invoked"]);
    let reasons = [
        "dm",
        "mention",
        "reply_all",
        "command",
        "dm_disabled",
        "group_disabled",
        "chat_not_allowed",
        "bot_identity_unknown",
        "own_message",
        "bot_sender",
        "no_mention",
        "user_not_allowed",
        "not_owner",
        "empty_request",
        "recalled",
        "handoff",
        "handoff_cut",
    ];
    assert_eq!(Reason::SPELLINGS, reasons);
    let handoffs = [
        "started",
        "refused",
        "cut_hops",
        "cut_pingpong",
        "cut_budget",
        "cancelled",
    ];
    assert_eq!(feishu_bridge::routing::HandoffOutcome::SPELLINGS, handoffs);
    assert_eq!(feishu_bridge::routing::Via::SPELLINGS, ["mention", "field"]);
    let statuses = ["pending", "processing", "done", "skipped", "failed"];
    assert_eq!(InboxStatus::SPELLINGS, statuses);
    let kinds = ["command_reply", "answer", "notice", "card", "card_update"];
    assert_eq!(ReplyKind::SPELLINGS, kinds);
    let states = ["queued", "running", "succeeded", "failed", "cancelled"];
    assert_eq!(TurnState::SPELLINGS, states);
    let asks = ["open", "answered", "timed_out", "closed"];
    assert_eq!(AskState::SPELLINGS, asks);
    let outcomes = [
        "answered",
        "stopped",
        "interrupted",
        "quote_unreadable",
        "agent_failed",
        "failed",
        "skipped",
        "delivered",
    ];
    assert_eq!(turns::Outcome::SPELLINGS, outcomes);
    let items = ["gathered", "packed", "passed_over", "recalled", "cleared"];
    assert_eq!(FeedItemState::SPELLINGS, items);
    let segments = ["waiting", "attached", "read", "cleared"];
    assert_eq!(SegmentState::SPELLINGS, segments);
    assert_eq!(DigestTrigger::SPELLINGS, ["schedule", "manual"]);
    let digests = ["written", "reset", "kept", "reset_failed"];
    assert_eq!(DigestStatus::SPELLINGS, digests);
    let why = [
        "summarized",
        "short",
        "summarizer_error",
        "summarizer_timeout",
        "empty_summary",
        "unreadable_transcript",
        "no_api_key",
        "file_write_failed",
        "session_gone",
        "database_error",
    ];
    assert_eq!(DigestReason::SPELLINGS, why);
}

#[test]
fn spellings_parse_back_and_strangers_are_refused() {
    for reason in Reason::ALL {
        assert_eq!(Reason::parse(reason.as_str()), Some(*reason));
        assert_eq!(reason.to_string(), reason.as_str());
    }
    assert_eq!(Reason::parse("SameTurnRequest"), None);
    assert_eq!(
        Exclusion::parse("same_turn_request"),
        Some(Exclusion::SameTurnRequest)
    );
    let err = TurnState::try_from("paused".to_string()).expect_err("unknown");
    assert_eq!(err.to_string(), "unknown turn state: \"paused\"");
}
