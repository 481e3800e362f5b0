//! Reading a `multipart/form-data` body (an agent's attachment) with `multer`: its parts,
//! each with its field name, file name and bytes (the Open API's upload bodies are written
//! by `feishu_api::multipart_form`). The body is read whole first (its
//! signature covers the raw bytes), so the parts are bounded by it; a body that does not
//! follow the format is refused with multer's reason.

use axum::body::Bytes;

/// The most parts a body may have.
const MAX_PARTS: usize = 16;

/// One part of the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The field's `name`.
    pub name: String,
    /// The `filename`, for a file part.
    pub filename: Option<String>,
    pub data: Bytes,
}

/// The `boundary` of a `multipart/form-data` content type.
pub fn boundary(content_type: &str) -> Option<String> {
    multer::parse_boundary(content_type)
        .ok()
        .filter(|b| !b.is_empty() && b.len() <= 200)
}

/// The parts of `body`, in order.
pub async fn parse(body: Bytes, boundary: &str) -> Result<Vec<Part>, String> {
    let stream = futures_util::stream::once(async move { Ok::<_, std::io::Error>(body) });
    let mut form = multer::Multipart::new(stream, boundary);
    let mut parts = Vec::new();
    while let Some(field) = form.next_field().await.map_err(|e| e.to_string())? {
        if parts.len() == MAX_PARTS {
            return Err("too many multipart parts".into());
        }
        let name = field
            .name()
            .ok_or("a multipart part has no field name")?
            .to_string();
        let filename = field.file_name().map(str::to_string);
        let data = field.bytes().await.map_err(|e| e.to_string())?;
        parts.push(Part {
            name,
            filename,
            data,
        });
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn parts_are_read_with_their_names_and_bytes() {
        let body = Bytes::from_static(
            b"--XY\r\nContent-Disposition: form-data; name=\"kind\"\r\n\r\nimage\r\n\
--XY\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--\r\n--XY--\r\n",
        );
        let parts = parse(body, "XY").await.expect("parses");
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].name.as_str(), &parts[0].data[..]),
            ("kind", &b"image"[..])
        );
        assert_eq!(parts[1].filename.as_deref(), Some("a.png"));
        assert_eq!(&parts[1].data[..], b"\x89PNG\r\n--");
    }

    #[test]
    fn the_boundary_is_read_from_the_content_type() {
        assert_eq!(
            boundary("multipart/form-data; boundary=\"abc\"").as_deref(),
            Some("abc")
        );
        assert_eq!(boundary("application/json"), None);
    }

    #[tokio::test]
    async fn a_cut_body_is_refused() {
        let body =
            Bytes::from_static(b"--XY\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc");
        assert!(parse(body, "XY").await.is_err());
    }
}
