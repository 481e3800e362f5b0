//! The fake Open API's media rules: it refuses what Feishu refuses, with Feishu's codes —
//! empty and oversized uploads, unknown upload types, resources not in their message,
//! image and file messages carrying keys no upload gave, docs the app may not read. Plain
//! HTTP against the fake (no bridge).

use reqwest::Method;
use serde_json::{Value, json};

use crate::{
    fake_openapi::Api,
    support::fake_feishu::{FILE_MAX_BYTES, IMAGE_MAX_BYTES},
};

/// A multipart upload to `path` with text `fields` and the file part `file_field`.
async fn upload(api: &Api, path: &str, fields: &[(&str, &str)], file: (&str, &[u8])) -> Value {
    let boundary = "fake-rules-b";
    let body = feishu_bridge::feishu_api::multipart_form(boundary, fields, (file.0, "x", file.1));
    api.request(Method::POST, path)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON")
}

fn code(v: &Value) -> i64 {
    v["code"].as_i64().unwrap_or(-1)
}

#[tokio::test]
async fn uploads_are_refused_as_feishu_refuses_them() {
    let api = Api::new().await;
    let images = "/open-apis/im/v1/images";
    let files = "/open-apis/im/v1/files";
    let message = [("image_type", "message")];
    assert_eq!(
        code(&upload(&api, images, &message, ("image", b"")).await),
        234010
    );
    let big = vec![1u8; IMAGE_MAX_BYTES + 1];
    assert_eq!(
        code(&upload(&api, images, &message, ("image", &big)).await),
        234006
    );
    assert_eq!(
        code(&upload(&api, images, &[], ("image", b"png")).await),
        234001
    );
    let pdf = [("file_type", "pdf"), ("file_name", "a.pdf")];
    let exe = [("file_type", "exe"), ("file_name", "a.exe")];
    assert_eq!(
        code(&upload(&api, files, &exe, ("file", b"MZ")).await),
        234001
    );
    let big = vec![1u8; FILE_MAX_BYTES + 1];
    assert_eq!(
        code(&upload(&api, files, &pdf, ("file", &big)).await),
        234006
    );
    assert!(api.fake.state.media.uploads().is_empty());

    let ok = upload(&api, images, &message, ("image", b"png")).await;
    assert_eq!(code(&ok), 0, "{ok}");
    let key = ok["data"]["image_key"].as_str().expect("a key").to_string();
    let sent = api.send("image", &json!({ "image_key": key }), "u-1").await;
    assert_eq!(sent.code(), 0, "{}", sent.json);
    let forged = api
        .send("image", &json!({"image_key": "img_never"}), "u-2")
        .await;
    assert_eq!(forged.code(), 230001, "{}", forged.json);
    assert_eq!(api.sent(), 1);
}

#[tokio::test]
async fn resources_and_docs_are_served_only_as_feishu_serves_them() {
    let api = Api::new().await;
    let media = &api.fake.state.media;
    media.image("om_1", "img_1", b"\x89PNG".to_vec());
    media.forbid("DocNo");
    media.forbid("WikiNo");
    let get = |path: String| {
        let api = &api;
        async move { api.call(Method::GET, &path, &Value::Null).await }
    };
    let base = "/open-apis/im/v1/messages/om_1/resources";
    let ok = api
        .request(Method::GET, &format!("{base}/img_1?type=image"))
        .send()
        .await
        .expect("answered");
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.bytes().await.expect("bytes").to_vec(), b"\x89PNG");
    assert_eq!(get(format!("{base}/img_1?type=file")).await.code(), 234003);
    assert_eq!(get(format!("{base}/img_2?type=image")).await.code(), 234003);
    assert_eq!(get(format!("{base}/img_1")).await.code(), 234001);
    let docx = get("/open-apis/docx/v1/documents/DocNo/raw_content".into()).await;
    assert_eq!((docx.status, docx.code()), (403, 1770032));
    let wiki = get("/open-apis/wiki/v2/spaces/get_node?token=WikiNo".into()).await;
    assert_eq!(wiki.code(), 131006);
}
