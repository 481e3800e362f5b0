//! Agent text cannot notify anyone. In a text message, a `post` and card markdown alike,
//! Feishu turns `<at user_id="all"></at>`, `<at id=all></at>` or `<at email=…>` into a
//! mention that pings a whole group or a person. An agent's answer (or a quoted message
//! it echoes) must never do that, so every mention tag in text the bridge sends is
//! written with a full-width `＜`: it reads the same and is no tag.

/// `text` with every `<at …>` and `</at>` tag made plain text.
pub fn mentions(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('<') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        if opens_mention(tail) {
            out.push('＜');
        } else {
            out.push('<');
        }
        rest = tail;
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Whether what follows a `<` is a mention tag: `at` or `/at` (any case, any spacing
/// Feishu might tolerate before the name), then a space, `/` or `>`.
fn opens_mention(after: &str) -> bool {
    let after = after.trim_start();
    let after = after.strip_prefix('/').map_or(after, str::trim_start);
    let mut chars = after.chars();
    let (Some(a), Some(t)) = (chars.next(), chars.next()) else {
        return false;
    };
    a.eq_ignore_ascii_case(&'a')
        && t.eq_ignore_ascii_case(&'t')
        && chars
            .next()
            .is_none_or(|c| c.is_whitespace() || c == '>' || c == '/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_mention_tag_is_made_plain() {
        for tag in [
            r#"<at user_id="all">所有人</at>"#,
            "<at id=all></at>",
            "<AT id=all></AT>",
            "< at email=boss@example.com>",
            "<at\tuser_id=\"ou_1\">Boss</at>",
            "<at/>",
        ] {
            let safe = mentions(tag);
            assert!(!safe.to_ascii_lowercase().contains("<at"), "{tag} → {safe}");
            assert!(!safe.contains("</at"), "{tag} → {safe}");
            assert!(!safe.contains("< at"), "{tag} → {safe}");
            assert!(safe.contains('＜'), "{safe}");
        }
    }

    #[test]
    fn other_angle_brackets_are_left_alone() {
        for text in [
            "a < b",
            "<attention>",
            "<font color='red'>x</font>",
            "Vec<Atom>",
            "no tags",
        ] {
            assert_eq!(mentions(text), text);
        }
    }
}
