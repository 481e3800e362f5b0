//! Threads are read in the order things were said — the message's create time, then its
//! id (compared as bytes), then the record's id — whatever order the records were
//! written in.

use feishu_bridge::{
    util::UnixMs,
    vocab::kinds::EventType::{AgentOutput, HumanMessage, TopicRoot, UserRequest},
};

use super::{
    ROOT,
    event_log::{kinds, message_events, messages, thread_candidates, thread_events},
    open, record, said_at, write,
};
use crate::{both_backends, support::TestDb};

async fn said_not_written(db: TestDb) {
    let s = open(&db).await;
    // One write each, so record ids follow this list: `b`'s answer first, then the
    // questions it answers, the root last. "om_B" and "om_a" were said in the same
    // millisecond; as bytes, "om_B" comes first (a locale would put "om_a" first).
    let written = [
        said_at(4_000, record("b", "om_answer", AgentOutput)),
        said_at(3_000, record("a", "om_a", HumanMessage)),
        said_at(2_000, record("a", "om_q", HumanMessage)),
        said_at(3_000, record("b", "om_a", HumanMessage)),
        said_at(3_000, record("a", "om_a", UserRequest)),
        said_at(1_000, record("a", ROOT, TopicRoot)),
        said_at(3_000, record("a", "om_B", HumanMessage)),
    ];
    for e in written {
        write(&*s, &[e]).await;
    }

    let newest = thread_candidates(&*s, "a", 10).await;
    assert_eq!(
        messages(&newest),
        ["om_answer", "om_a", "om_B", "om_q", ROOT],
        "newest said first"
    );
    let said: Vec<_> = newest.iter().map(|c| c.created_at).collect();
    let expected = [4_000, 3_000, 3_000, 2_000, 1_000].map(UnixMs);
    assert_eq!(said, expected);
    assert_eq!(
        messages(&thread_candidates(&*s, "a", 2).await),
        ["om_answer", "om_a"],
        "the window holds the newest said, not the newest written"
    );
    assert_eq!(
        messages(&thread_candidates(&*s, "b", 10).await),
        ["om_answer", "om_a"]
    );

    let listed = thread_events(&*s, "a", super::CHAT, ROOT).await;
    assert_eq!(
        kinds(&listed),
        [
            (ROOT, TopicRoot),
            ("om_q", HumanMessage),
            ("om_B", HumanMessage),
            ("om_a", HumanMessage),
            ("om_a", UserRequest),
        ],
        "oldest said first; one message's records in write order"
    );
    let of_message = message_events(&*s, "om_a").await;
    let by: Vec<_> = of_message
        .iter()
        .map(|r| (r.bot_profile.as_str(), r.event_type))
        .collect();
    assert_eq!(
        by,
        [("a", HumanMessage), ("b", HumanMessage), ("a", UserRequest)]
    );
}
both_backends!(
    threads_are_read_in_the_order_things_were_said_whatever_the_record_order,
    said_not_written
);
