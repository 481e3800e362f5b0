//! Reading a `multipart/form-data` body (an agent's attachment): its parts, each with
//! its field name, file name and bytes. Bounded by the body it reads; refuses what does
//! not follow the format rather than guessing.

/// One part of the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part<'a> {
    /// The field's `name`.
    pub name: String,
    /// The `filename`, for a file part.
    pub filename: Option<String>,
    pub data: &'a [u8],
}

/// The `boundary` of a `multipart/form-data` content type.
pub fn boundary(content_type: &str) -> Option<String> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
            .filter(|b| !b.is_empty() && b.len() <= 200)
    })
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// The parts of `body`, in order.
pub fn parse<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<Part<'a>>, &'static str> {
    let delimiter = format!("--{boundary}");
    let next = format!("\r\n--{boundary}");
    let mut at = find(body, delimiter.as_bytes(), 0).ok_or("no multipart boundary in the body")?
        + delimiter.len();
    let mut parts = Vec::new();
    loop {
        if body.get(at..at + 2) == Some(b"--") {
            return Ok(parts);
        }
        if body.get(at..at + 2) != Some(b"\r\n") {
            return Err("a multipart boundary is not followed by a line end");
        }
        at += 2;
        let head_end = find(body, b"\r\n\r\n", at).ok_or("a multipart part has no header end")?;
        let head = std::str::from_utf8(&body[at..head_end])
            .map_err(|_| "a multipart part header is not UTF-8")?;
        let (name, filename) = disposition(head).ok_or("a multipart part has no field name")?;
        let start = head_end + 4;
        let end = find(body, next.as_bytes(), start).ok_or("the multipart body is cut off")?;
        parts.push(Part {
            name,
            filename,
            data: &body[start..end],
        });
        at = end + next.len();
        if parts.len() > 16 {
            return Err("too many multipart parts");
        }
    }
}

/// `name` and `filename` of a part's `Content-Disposition: form-data` header.
fn disposition(head: &str) -> Option<(String, Option<String>)> {
    let line = head.lines().find(|l| {
        l.split_once(':')
            .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("content-disposition"))
    })?;
    let (_, value) = line.split_once(':')?;
    let param = |key: &str| {
        value.split(';').find_map(|p| {
            let (k, v) = p.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
        })
    };
    Some((param("name")?, param("filename")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_read_with_their_names_and_bytes() {
        let body = b"--XY\r\nContent-Disposition: form-data; name=\"kind\"\r\n\r\nimage\r\n\
--XY\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--\r\n--XY--\r\n";
        let parts = parse(body, "XY").expect("parses");
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].name.as_str(), parts[0].data),
            ("kind", &b"image"[..])
        );
        assert_eq!(parts[1].filename.as_deref(), Some("a.png"));
        assert_eq!(parts[1].data, b"\x89PNG\r\n--");
    }

    #[test]
    fn the_boundary_is_read_from_the_content_type() {
        assert_eq!(
            boundary("multipart/form-data; boundary=\"abc\"").as_deref(),
            Some("abc")
        );
        assert_eq!(boundary("application/json"), None);
    }

    #[test]
    fn a_cut_body_is_refused() {
        let body = b"--XY\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc";
        assert!(parse(body, "XY").is_err());
    }
}
