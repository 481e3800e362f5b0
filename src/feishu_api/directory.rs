//! Names through the Open API: users by open_id (`contact/v3/users/batch`, at most
//! [`USERS_PER_CALL`] ids a call) and a chat by its id (`im/v1/chats/{chat_id}`). Both
//! read with the tenant token, so a user the app cannot see (out of its contacts range)
//! is left out of the answer, and a missing scope answers 99991672.

use serde::Deserialize;

use super::{FeishuClient, OpenApiError, budget::Urgency, call::Call};

/// Reading users, as errors name it.
const USERS_ENDPOINT: &str = "GET /open-apis/contact/v3/users/batch";
/// Reading a chat, as errors name it.
const CHAT_ENDPOINT: &str = "GET /open-apis/im/v1/chats/{chat_id}";

/// Most ids in one users call (Feishu refuses more).
pub const USERS_PER_CALL: usize = 50;

/// The scope reading users' names needs.
pub const USERS_SCOPE: &str = "contact:user.base:readonly";
/// The scope reading chats' names needs.
pub const CHATS_SCOPE: &str = "im:chat:readonly";

#[derive(Deserialize)]
struct UsersAnswer {
    #[serde(default)]
    data: Option<UsersData>,
}

#[derive(Deserialize)]
struct UsersData {
    #[serde(default)]
    items: Vec<User>,
}

#[derive(Deserialize)]
struct User {
    #[serde(default)]
    open_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct ChatAnswer {
    #[serde(default)]
    data: Option<Chat>,
}

#[derive(Deserialize)]
struct Chat {
    #[serde(default)]
    name: Option<String>,
}

impl FeishuClient {
    /// The names of the users among `open_ids` (at most [`USERS_PER_CALL`]) the app can
    /// see: `(open_id, name)`; the others are left out.
    pub async fn user_names(
        &self,
        open_ids: &[String],
    ) -> Result<Vec<(String, String)>, OpenApiError> {
        let mut query: Vec<(&str, &str)> = vec![("user_id_type", "open_id")];
        query.extend(open_ids.iter().map(|id| ("user_ids", id.as_str())));
        let call = Call {
            method: reqwest::Method::GET,
            endpoint: USERS_ENDPOINT,
            url: format!("{}/open-apis/contact/v3/users/batch", self.base),
            query: &query,
            urgency: Urgency::Required,
        };
        let answer: UsersAnswer = self.call(call, || None).await?;
        let items = answer.data.map(|d| d.items).unwrap_or_default();
        Ok(items
            .into_iter()
            .filter_map(|u| Some((u.open_id?, u.name.filter(|n| !n.trim().is_empty())?)))
            .collect())
    }

    /// A chat's name; `None` when it has none.
    pub async fn chat_name(&self, chat_id: &str) -> Result<Option<String>, OpenApiError> {
        let call = Call {
            method: reqwest::Method::GET,
            endpoint: CHAT_ENDPOINT,
            url: format!("{}/open-apis/im/v1/chats/{chat_id}", self.base),
            query: &[("user_id_type", "open_id")],
            urgency: Urgency::Required,
        };
        let answer: ChatAnswer = self.call(call, || None).await?;
        Ok(answer
            .data
            .and_then(|c| c.name)
            .filter(|n| !n.trim().is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use axum::{Json, Router, extract::RawQuery, routing::get};
    use serde_json::json;

    use crate::feishu_api::client::tests::{client, open_api, token_ok};

    #[tokio::test]
    async fn users_are_asked_by_open_id_and_the_unseen_are_left_out() {
        let users = Router::new().route(
            "/open-apis/contact/v3/users/batch",
            get(|RawQuery(q): RawQuery| async move {
                let q = q.unwrap_or_default();
                assert!(q.contains("user_id_type=open_id"), "{q}");
                assert!(q.contains("user_ids=ou_a&user_ids=ou_b"), "{q}");
                Json(json!({"code": 0, "msg": "success", "data": {"items": [
                    {"open_id": "ou_a", "name": "Alice"},
                    {"open_id": "ou_b", "name": ""}
                ]}}))
            }),
        );
        let base = open_api(token_ok(), users).await;
        let ids = ["ou_a".to_string(), "ou_b".to_string()];
        let names = client(base).user_names(&ids).await.expect("answered");
        assert_eq!(names, [("ou_a".to_string(), "Alice".to_string())]);
    }

    #[tokio::test]
    async fn a_missing_scope_is_an_api_error_with_its_code() {
        let chat = Router::new().route(
            "/open-apis/im/v1/chats/{id}",
            get(|| async {
                Json(json!({"code": 99991672, "msg": "Access denied. One of the following scopes is required: [im:chat:readonly]"}))
            }),
        );
        let base = open_api(token_ok(), chat).await;
        let err = client(base).chat_name("oc_1").await.expect_err("refused");
        assert_eq!(err.code(), Some(99991672));
    }
}
