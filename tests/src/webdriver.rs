//! A small W3C WebDriver client for the console's browser test: chromedriver speaks JSON over
//! HTTP, so a handful of commands (navigate, run a script, find, click, type, screenshot)
//! need no crate beyond the HTTP client the workspace already has.
//!
//! [`Browser::start`] runs Debian's `chromedriver` with headless `chromium` and a fresh
//! profile; both are found on PATH (or `CHROMEDRIVER` and `CHROMIUM`). When either is
//! missing it fails with a message saying how to install them (`infra/local/test` does).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

/// The key W3C WebDriver puts an element reference under.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Flags that make headless Chromium start and stay quiet in a container.
const CHROME_ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

/// How long any one wait polls before the test fails (a bound, not a timing assertion).
pub const WAIT: Duration = Duration::from_secs(60);

fn which(name: &str, env: &str, fallback: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env).map(PathBuf::from) {
        return path.is_file().then_some(path);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .chain([PathBuf::from(fallback)])
        .find(|p| p.is_file())
}

/// chromedriver and chromium, or why they cannot be used.
pub fn browser_binaries() -> Result<(PathBuf, PathBuf), String> {
    let driver = which("chromedriver", "CHROMEDRIVER", "/usr/bin/chromedriver");
    let chrome = which("chromium", "CHROMIUM", "/usr/bin/chromium");
    match (driver, chrome) {
        (Some(d), Some(c)) => Ok((d, c)),
        _ => Err(
            "the console's browser test needs Debian's `chromium` and `chromium-driver` \
                  (chromedriver); `infra/local/test` installs them (apt-get install -y chromium \
                  chromium-driver), or set CHROMIUM and CHROMEDRIVER to their paths"
                .into(),
        ),
    }
}

/// A chromedriver process with one headless Chromium session, ended on drop.
pub struct Browser {
    http: reqwest::Client,
    session: String,
    driver: Child,
    profile: PathBuf,
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Browser {
    pub async fn start(width: u32, height: u32) -> Result<Browser, String> {
        let (driver_path, chrome_path) = browser_binaries()?;
        let port = free_port();
        let driver = Command::new(&driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", driver_path.display()))?;
        let profile = std::env::temp_dir().join(format!(
            "cronledger-console-chrome-{}-{port}",
            std::process::id()
        ));
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Browser {
            http,
            session: format!("{base}/session"),
            driver,
            profile,
        };
        let give_up = Instant::now() + WAIT;
        loop {
            let ready = browser.http.get(format!("{base}/status")).send().await;
            if let Ok(resp) = ready {
                let body: Value = resp.json().await.unwrap_or_default();
                if body["value"]["ready"] == true {
                    break;
                }
            }
            if Instant::now() > give_up {
                return Err("chromedriver did not become ready".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut args: Vec<String> = CHROME_ARGS.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", browser.profile.display()));
        args.push(format!("--window-size={width},{height}"));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chrome_path, "args": args},
        }}});
        let created = browser.command("POST", "", caps).await?;
        let id = created["sessionId"]
            .as_str()
            .ok_or_else(|| format!("no session id in {created}"))?;
        browser.session = format!("{base}/session/{id}");
        Ok(browser)
    }

    /// One command; its `value`, or the driver's error.
    async fn command(&self, method: &str, path: &str, body: Value) -> Result<Value, String> {
        let url = format!("{}{path}", self.session);
        let req = match method {
            "GET" => self.http.get(&url),
            "DELETE" => self.http.delete(&url),
            _ => self.http.post(&url).json(&body),
        };
        let resp = req
            .send()
            .await
            .map_err(|e| format!("{method} {url}: {e}"))?;
        let status = resp.status();
        let answer: Value = resp
            .json()
            .await
            .map_err(|e| format!("{method} {url}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{method} {path}: {status} {}", answer["value"]));
        }
        Ok(answer["value"].clone())
    }

    pub async fn goto(&self, url: &str) -> Result<(), String> {
        self.command("POST", "/url", json!({"url": url}))
            .await
            .map(drop)
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    pub async fn eval(&self, script: &str, args: Value) -> Result<Value, String> {
        self.command(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": args}),
        )
        .await
    }

    /// Polls `script` until it returns something truthy (not false, null, 0 or "").
    pub async fn wait_for(&self, what: &str, script: &str) -> Result<Value, String> {
        let give_up = Instant::now() + WAIT;
        let mut last = Value::Null;
        while Instant::now() < give_up {
            last = self.eval(script, json!([])).await?;
            let truthy = !matches!(&last, Value::Null | Value::Bool(false))
                && last != json!(0)
                && last != json!("");
            if truthy {
                return Ok(last);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("waited for {what}; last answer {last}"))
    }

    /// The first element `css` selects.
    pub async fn find(&self, css: &str) -> Result<String, String> {
        let found = self
            .command(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await?;
        found[ELEMENT]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("no element for {css}: {found}"))
    }

    /// Clicks it as a person would (the driver scrolls to it and checks it is clickable).
    pub async fn click(&self, css: &str) -> Result<(), String> {
        let id = self.find(css).await?;
        self.command("POST", &format!("/element/{id}/click"), json!({}))
            .await
            .map(drop)
    }

    /// Types `text` into it, key by key.
    pub async fn type_into(&self, css: &str, text: &str) -> Result<(), String> {
        let id = self.find(css).await?;
        self.command(
            "POST",
            &format!("/element/{id}/value"),
            json!({"text": text}),
        )
        .await
        .map(drop)
    }

    pub async fn resize(&self, width: u32, height: u32) -> Result<(), String> {
        self.command(
            "POST",
            "/window/rect",
            json!({"width": width, "height": height}),
        )
        .await
        .map(drop)
    }

    /// Writes the viewport as a PNG to `path`.
    pub async fn screenshot(&self, path: &Path) -> Result<(), String> {
        let data = self.command("GET", "/screenshot", Value::Null).await?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(data.as_str().unwrap_or(""))
            .map_err(|e| format!("screenshot: {e}"))?;
        std::fs::write(path, png).map_err(|e| format!("{}: {e}", path.display()))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session closes Chromium (killing the driver alone would leave it
        // running); a plain blocking request, as drop cannot wait on the async client.
        if let Some((host, path)) = self
            .session
            .strip_prefix("http://")
            .and_then(|rest| rest.split_once('/'))
        {
            if let Ok(mut stream) = std::net::TcpStream::connect(host) {
                use std::io::{Read as _, Write as _};
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let request = format!(
                    "DELETE /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                if stream.write_all(request.as_bytes()).is_ok() {
                    let _ = stream.read_to_end(&mut Vec::new());
                }
            }
        }
        // Then the driver; the profile folder after both.
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
