//! A W3C WebDriver client for the dashboard's browser test: the commands it uses (new
//! session, navigate, find element, element text, send keys, click, execute script,
//! screenshot, delete session), as JSON over loopback HTTP to chromedriver, with reqwest
//! (already a dependency).
//!
//! Why not fantoccini: its `webdriver` dependency brings a second ICU (1.5, for text
//! segmentation the test never needs), http 0.2, cookie 0.16 and thiserror 1 into every
//! test build: about 53 s of a cold 2-core build's compile time (BENCHMARKS.md, "The house"),
//! for what is here about a hundred lines.

use base64::Engine as _;
use serde_json::{json, Value};

/// The W3C key of an element reference in a `find element` answer.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A command the driver refused or could not be sent.
#[derive(Debug)]
pub struct WebDriverError(pub String);

impl std::fmt::Display for WebDriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WebDriverError {}

type Result<T> = std::result::Result<T, WebDriverError>;

/// One browser session.
pub struct Browser {
    http: reqwest::Client,
    session: String,
}

/// An element found in the page.
pub struct Element<'a> {
    browser: &'a Browser,
    id: String,
}

impl Browser {
    /// Start a session at the driver `url` (`http://127.0.0.1:PORT`) with these capabilities
    /// (`goog:chromeOptions`, ...).
    pub async fn connect(url: &str, capabilities: Value) -> Result<Browser> {
        let http = reqwest::Client::new();
        let answer = send(
            http.post(format!("{url}/session"))
                .json(&json!({ "capabilities": { "alwaysMatch": capabilities } })),
        )
        .await?;
        let session = answer["sessionId"]
            .as_str()
            .ok_or_else(|| WebDriverError(format!("no session id in {answer}")))?;
        Ok(Browser {
            http,
            session: format!("{url}/session/{session}"),
        })
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value> {
        let req = self
            .http
            .post(format!("{}/{path}", self.session))
            .json(&body);
        send(req).await
    }

    async fn get(&self, path: &str) -> Result<Value> {
        send(self.http.get(format!("{}/{path}", self.session))).await
    }

    pub async fn goto(&self, url: &str) -> Result<()> {
        self.post("url", json!({ "url": url })).await.map(drop)
    }

    /// The first element matching a CSS selector.
    pub async fn find_css(&self, selector: &str) -> Result<Element<'_>> {
        let v = self
            .post(
                "element",
                json!({ "using": "css selector", "value": selector }),
            )
            .await?;
        let id = v[ELEMENT_KEY]
            .as_str()
            .ok_or_else(|| WebDriverError(format!("no element reference in {v}")))?;
        Ok(Element {
            browser: self,
            id: id.to_string(),
        })
    }

    /// The element with this id attribute.
    pub async fn find_id(&self, id: &str) -> Result<Element<'_>> {
        self.find_css(&format!("#{id}")).await
    }

    /// Run `script` (a function body; `arguments[i]` are `args`) and return what it returns.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        self.post("execute/sync", json!({ "script": script, "args": args }))
            .await
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        let v = self.get("screenshot").await?;
        let b64 = v
            .as_str()
            .ok_or_else(|| WebDriverError(format!("no screenshot in {v}")))?;
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| WebDriverError(format!("screenshot: {e}")))
    }

    /// End the session (the browser exits).
    pub async fn close(self) -> Result<()> {
        send(self.http.delete(&self.session)).await.map(drop)
    }
}

impl Element<'_> {
    fn path(&self, what: &str) -> String {
        format!("element/{}/{what}", self.id)
    }

    pub async fn text(&self) -> Result<String> {
        let v = self.browser.get(&self.path("text")).await?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    pub async fn send_keys(&self, text: &str) -> Result<()> {
        self.browser
            .post(&self.path("value"), json!({ "text": text }))
            .await
            .map(drop)
    }

    pub async fn click(&self) -> Result<()> {
        self.browser
            .post(&self.path("click"), json!({}))
            .await
            .map(drop)
    }
}

/// Send a command; its answer's `value`, or the driver's error.
async fn send(req: reqwest::RequestBuilder) -> Result<Value> {
    let resp = req
        .send()
        .await
        .map_err(|e| WebDriverError(format!("sending to the driver: {e}")))?;
    let status = resp.status();
    let body: Value = resp
        .json()
        .await
        .map_err(|e| WebDriverError(format!("the driver's answer ({status}): {e}")))?;
    let value = body.get("value").cloned().unwrap_or(Value::Null);
    if status.is_success() {
        Ok(value)
    } else {
        Err(WebDriverError(format!(
            "{status}: {} {}",
            value["error"].as_str().unwrap_or("error"),
            value["message"].as_str().unwrap_or_default()
        )))
    }
}
