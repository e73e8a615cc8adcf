//! A Model Context Protocol server over stdio, built with the official Rust SDK (`rmcp`), whose
//! tools misbehave on purpose. cairn's tests start it as a real MCP server (`--mcp`,
//! `[[mcp]]`) to check what a user's servers can do to cairn: errors, hangs, crashes, floods.
//!
//! ```text
//! cargo run --release --example mcp_test_server      # speaks MCP on stdin/stdout
//! ```
//!
//! Tools:
//! - `echo {text, options: {upper, repeat}, tags: [..]}`: a nested schema; the text back, with
//!   the same data as structured content.
//! - `add {a, b}`: the sum, as text.
//! - `fail {message}`: a tool error (`isError: true`) with the message.
//! - `reject {}`: a JSON-RPC "invalid params" error.
//! - `flaky {}`: a JSON-RPC internal error on the first two calls of the process, then `ok`.
//! - `hang {}`: never answers.
//! - `crash {}`: writes a line to stderr and exits with status 3.
//! - `flood {megabytes}`: a text result of that many megabytes.
//! - `picture {}`: an image (a 1x1 PNG), which a client should name, not dump.
//! - `environment {}`: the names of the environment variables the server was started with.
//!
//! `MCP_TEST_NOISE=N` makes the server write N kilobytes to stderr at start.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, ServerHandler, ServiceExt};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoOptions {
    /// Upper-case the text.
    upper: bool,
    /// How many times to repeat it.
    #[schemars(range(min = 1, max = 5))]
    repeat: u32,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
    /// How to change it.
    options: EchoOptions,
    /// Labels, sent back as they are.
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// The first number.
    a: f64,
    /// The second number.
    b: f64,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct FailArgs {
    /// What the error says.
    message: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct FloodArgs {
    /// Megabytes of text to return.
    megabytes: u32,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

#[derive(Debug, Clone)]
struct TestServer {
    flaky_calls: Arc<AtomicUsize>,
    #[expect(dead_code, reason = "read by the code #[tool_handler] writes")]
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl TestServer {
    fn new() -> Self {
        TestServer {
            flaky_calls: Arc::new(AtomicUsize::new(0)),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Send the text back, changed as the options say.")]
    fn echo(&self, Parameters(a): Parameters<EchoArgs>) -> CallToolResult {
        let text = if a.options.upper {
            a.text.to_uppercase()
        } else {
            a.text.clone()
        };
        let text = vec![text; a.options.repeat as usize].join(" ");
        let mut r = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
        r.structured_content = Some(serde_json::json!({"text": text, "tags": a.tags}));
        r
    }

    #[tool(description = "Add two numbers.")]
    fn add(&self, Parameters(a): Parameters<AddArgs>) -> String {
        (a.a + a.b).to_string()
    }

    #[tool(description = "Always fails with the given message, as a tool error.")]
    fn fail(&self, Parameters(a): Parameters<FailArgs>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(a.message)])
    }

    #[tool(description = "Always refuses its arguments with a JSON-RPC error.")]
    fn reject(&self, Parameters(_): Parameters<NoArgs>) -> Result<String, ErrorData> {
        Err(ErrorData::invalid_params(
            "reject never accepts its arguments",
            None,
        ))
    }

    #[tool(description = "Fails with an internal error twice, then answers ok.")]
    fn flaky(&self, Parameters(_): Parameters<NoArgs>) -> Result<String, ErrorData> {
        if self.flaky_calls.fetch_add(1, Ordering::SeqCst) < 2 {
            return Err(ErrorData::internal_error("busy, try again", None));
        }
        Ok("ok".to_string())
    }

    #[tool(description = "Never answers.")]
    async fn hang(&self, Parameters(_): Parameters<NoArgs>) -> String {
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    }

    #[tool(description = "Exits the server with status 3.")]
    fn crash(&self, Parameters(_): Parameters<NoArgs>) -> String {
        eprintln!("mcp_test_server: crashing on purpose");
        std::process::exit(3);
    }

    #[tool(description = "Returns that many megabytes of text.")]
    fn flood(&self, Parameters(a): Parameters<FloodArgs>) -> String {
        "x".repeat(a.megabytes as usize * 1024 * 1024)
    }

    #[tool(description = "Returns a small picture.")]
    fn picture(&self, Parameters(_): Parameters<NoArgs>) -> CallToolResult {
        const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
        CallToolResult::success(vec![
            ContentBlock::text("here is the picture"),
            ContentBlock::image(PNG_1X1, "image/png"),
        ])
    }

    #[tool(description = "The names of the environment variables the server sees.")]
    fn environment(&self, Parameters(_): Parameters<NoArgs>) -> String {
        let mut names: Vec<String> = std::env::vars_os()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.join("\n")
    }
}

#[tool_handler]
impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Some(kb) = std::env::var("MCP_TEST_NOISE")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let line = "noise ".repeat(170);
        for _ in 0..kb {
            eprintln!("{line}");
        }
    }
    let service = TestServer::new().serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
