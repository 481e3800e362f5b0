//! Taking the Verification Token out of an authenticated envelope before it is stored.
//!
//! Without an Encrypt Key the Verification Token is a profile's only credential, and
//! every envelope carries it: schema 2.0 in `header.token`, schema 1.0 (and the
//! challenge) as the top-level `token`. Once the envelope is verified the bridge has no
//! further use for it, so the member is cut out of the JSON text and every other byte is
//! kept as received: the worker parses the same document, nothing is reformatted.
//!
//! Card-update tokens are not touched: `event.token` of `card.action.trigger` and the
//! top-level `token` of a legacy card callback (which goes through `verify_card`, not
//! here) are `c-…` tokens for a delayed card update, not the profile's credential.

/// `json`, an envelope already known to be valid JSON, without its top-level `token`
/// and without `header.token`; `None` when it is not a JSON object.
pub fn without_verification_token(json: &str) -> Option<String> {
    let mut text = json.to_string();
    // One member at a time, rescanning after each cut, so that cuts never overlap
    // (duplicate members are refused earlier, but this does not rely on it).
    while let Some((from, to)) = next_token(&text)? {
        text.replace_range(from..to, "");
    }
    Some(text)
}

/// The byte range of the next verification-token member to cut, if any.
fn next_token(text: &str) -> Option<Option<(usize, usize)>> {
    let b = text.as_bytes();
    let open = skip_ws(b, 0);
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let top = members(b, open)?;
    if let Some(k) = top.iter().position(|m| m.key == "token") {
        return Some(Some(cut(&top, k)));
    }
    for header in top.iter().filter(|m| m.key == "header") {
        if b.get(header.value_start) != Some(&b'{') {
            continue;
        }
        let inner = members(b, header.value_start)?;
        if let Some(k) = inner.iter().position(|m| m.key == "token") {
            return Some(Some(cut(&inner, k)));
        }
    }
    Some(None)
}

/// One `"key": value` member of an object, by byte offsets.
struct Member {
    key: String,
    key_start: usize,
    value_start: usize,
    value_end: usize,
}

/// The range that removes member `k` together with one separating comma.
fn cut(members: &[Member], k: usize) -> (usize, usize) {
    match (k.checked_sub(1), members.get(k + 1)) {
        (_, Some(next)) => (members[k].key_start, next.key_start),
        (Some(prev), None) => (members[prev].value_end, members[k].value_end),
        (None, None) => (members[k].key_start, members[k].value_end),
    }
}

/// The members of the object opening at `open`.
fn members(b: &[u8], open: usize) -> Option<Vec<Member>> {
    let mut out = Vec::new();
    let mut i = skip_ws(b, open + 1);
    if b.get(i) == Some(&b'}') {
        return Some(out);
    }
    loop {
        let key_start = i;
        let key_end = skip_string(b, i)?;
        let key = decode_key(&b[key_start..key_end])?;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let value_start = skip_ws(b, i + 1);
        let value_end = skip_value(b, value_start)?;
        out.push(Member {
            key,
            key_start,
            value_start,
            value_end,
        });
        i = skip_ws(b, value_end);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b'}' => return Some(out),
            _ => return None,
        }
    }
}

/// A quoted key, unescaped (`"tok\u0065n"` is `token` to every JSON reader).
fn decode_key(quoted: &[u8]) -> Option<String> {
    if quoted.contains(&b'\\') {
        return serde_json::from_slice(quoted).ok();
    }
    let inner = quoted.get(1..quoted.len().checked_sub(1)?)?;
    String::from_utf8(inner.to_vec()).ok()
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The offset just past the string starting at `i`.
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    loop {
        match b.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
}

/// The offset just past the value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let end = b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(b.len(), |n| i + n);
            (end > i).then_some(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::without_verification_token as strip;

    fn stripped(json: &str) -> String {
        let out = strip(json).expect("an object");
        serde_json::from_str::<Value>(&out).expect("still valid JSON");
        out
    }

    #[test]
    fn schema_2_loses_header_token_and_keeps_every_other_byte() {
        let v2 = r#"{"schema":"2.0","header":{"event_id":"e1","token":"VT","create_time":"1"},"event":{"token":"c-card","text":"a \"token\": {x}"}}"#;
        assert_eq!(
            stripped(v2),
            r#"{"schema":"2.0","header":{"event_id":"e1","create_time":"1"},"event":{"token":"c-card","text":"a \"token\": {x}"}}"#
        );
        // The token as the last member of the header, with spacing kept around it.
        let last =
            "{ \"header\" : { \"event_id\" : \"e\" , \"token\" : \"VT\" } , \"event\" : [1, 2] }";
        assert_eq!(
            stripped(last),
            "{ \"header\" : { \"event_id\" : \"e\" } , \"event\" : [1, 2] }"
        );
        assert_eq!(stripped(r#"{"header":{"token":"VT"}}"#), r#"{"header":{}}"#);
    }

    #[test]
    fn schema_1_loses_the_top_level_token_however_it_is_spelled() {
        let v1 =
            r#"{"ts":"1.5","uuid":"u","token":"VT","type":"event_callback","event":{"type":"x"}}"#;
        assert_eq!(
            stripped(v1),
            r#"{"ts":"1.5","uuid":"u","type":"event_callback","event":{"type":"x"}}"#
        );
        let escaped = r#"{"uuid":"u","event":{},"tok\u0065n":"VT"}"#;
        assert_eq!(stripped(escaped), r#"{"uuid":"u","event":{}}"#);
        let twice = r#"{"token":"VT","header":{"token":"VT"},"token":"VT"}"#;
        let out = stripped(twice);
        assert!(!out.contains("VT"), "{out}");
    }

    #[test]
    fn a_document_without_tokens_is_unchanged_and_a_non_object_is_refused() {
        let doc =
            json!({"schema":"2.0","header":{"event_id":"e"},"event":{"n":-1.5e3,"b":[true,null]}})
                .to_string();
        assert_eq!(stripped(&doc), doc);
        assert_eq!(strip(r#"["2.0",{"token":"VT"}]"#), None);
    }
}
