//! The chat webhooks' payload shapes: a notice becomes the JSON body that WeCom's, DingTalk's,
//! Feishu's or Slack's incoming-webhook bots take, or labpool's own generic body for a relay.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Which bot the webhook URL belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// labpool's own body: every field, for a relay or a script.
    #[default]
    Generic,
    /// WeCom (企业微信) group bot.
    Wecom,
    /// DingTalk (钉钉) custom bot.
    Dingtalk,
    /// Feishu / Lark (飞书) custom bot.
    Feishu,
    /// Slack incoming webhook.
    Slack,
}

/// A notice to deliver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    /// What kind: `alert`, `zombie`, `job`.
    pub kind: String,
    /// One line: `[FIRING] gpu_temperature node1/gpu0`.
    pub title: String,
    /// What happened, with the values, and what to do.
    pub text: String,
    /// The member it concerns, to mention where the bot can.
    pub user: Option<String>,
    /// Everything else, for the generic body.
    pub fields: Value,
}

impl Notice {
    /// The title and text as one message, naming the member.
    fn message(&self) -> String {
        match &self.user {
            Some(u) => format!("{}\n{}\n(@{u})", self.title, self.text),
            None => format!("{}\n{}", self.title, self.text),
        }
    }
}

/// The body to POST for `notice` to a `format` webhook.
pub fn body(format: Format, notice: &Notice) -> Value {
    let users: Vec<&str> = notice.user.iter().map(String::as_str).collect();
    match format {
        Format::Generic => json!({
            "kind": notice.kind,
            "title": notice.title,
            "text": notice.text,
            "user": notice.user,
            "fields": notice.fields,
        }),
        Format::Wecom => json!({
            "msgtype": "text",
            "text": { "content": notice.message(), "mentioned_list": users },
        }),
        Format::Dingtalk => json!({
            "msgtype": "text",
            "text": { "content": notice.message() },
            "at": { "atUserIds": users, "isAtAll": false },
        }),
        Format::Feishu => json!({
            "msg_type": "text",
            "content": { "text": feishu_text(&notice.message()) },
        }),
        Format::Slack => json!({ "text": slack_text(&notice.message()) }),
    }
}

/// Text as Slack shows it and nothing more: `<!channel>`, `<!everyone>`, `<@U123>` and links
/// in a job's name or output reach no one (Slack's own escaping of `&`, `<` and `>`).
fn slack_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Text as Feishu shows it: an `<at user_id="all">` in a job's name mentions no one (the
/// bracket is shown as a full-width one).
fn feishu_text(text: &str) -> String {
    text.replace('<', "\u{ff1c}").replace('>', "\u{ff1e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bot_gets_its_own_shape() {
        let n = Notice {
            kind: "zombie".into(),
            title: "[ZOMBIE] job 12".into(),
            text: "idle".into(),
            user: Some("alice".into()),
            fields: json!({"job": 12}),
        };
        assert_eq!(
            body(Format::Wecom, &n)["text"]["mentioned_list"][0],
            "alice"
        );
        assert_eq!(body(Format::Dingtalk, &n)["at"]["atUserIds"][0], "alice");
        assert_eq!(body(Format::Feishu, &n)["msg_type"], "text");
        assert!(
            body(Format::Slack, &n)["text"]
                .as_str()
                .unwrap()
                .contains("@alice")
        );
        assert_eq!(body(Format::Generic, &n)["fields"]["job"], 12);
    }

    /// A member's text (a job name, an output line) mentions no one in a chat.
    #[test]
    fn a_members_text_mentions_no_one() {
        let n = Notice {
            kind: "job".into(),
            title: "labpool Job_id=3 Name=<!channel> <!everyone> Began".into(),
            text: "<at user_id=\"all\">all</at> & <https://x.example|click>".into(),
            user: None,
            fields: json!({}),
        };
        let slack = body(Format::Slack, &n)["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(!slack.contains('<') && !slack.contains('>'), "{slack}");
        assert!(
            slack.contains("&lt;!channel&gt;") && slack.contains("&amp;"),
            "{slack}"
        );
        let feishu = body(Format::Feishu, &n)["content"]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(!feishu.contains("<at"), "{feishu}");
    }
}
