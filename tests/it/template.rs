//! Chat templates: the real templates of both presets rendered exactly (system prompts, default
//! system prompts, tool results), the family fallbacks for files without a template, and the
//! errors for templates that do not parse or that raise.

use cairn::model::template::{ChatTemplate, Message, TemplateError, TemplateSource};
use cairn::model::tokenizer::Tokenizer;
use candle_core::quantized::gguf_file::Value;

use super::tokenizer::{preset, tiny_gguf, tiny_tokenizer_metadata};

const QWEN: &str = "qwen2.5-coder-0.5b";
const SMOL: &str = "smollm2-135m";

fn template(name: &str) -> ChatTemplate {
    let (content, tokenizer) = preset(name);
    ChatTemplate::from_gguf(content, tokenizer).unwrap()
}

#[test]
fn qwen_renders_system_and_user_as_chatml() {
    let chat = template(QWEN);
    assert_eq!(chat.source(), TemplateSource::Gguf);
    assert!(!chat.is_fallback());
    let prompt = chat
        .render(
            &[
                Message::system("You are a helpful assistant."),
                Message::user("What is 2+2?"),
            ],
            true,
        )
        .unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n\
         <|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    );
    // The same text as llama.cpp's reference vector, so control tokens come out as single ids.
    let ids = preset(QWEN).1.encode(&prompt).unwrap();
    assert_eq!(&ids[..3], &[151644, 8948, 198]);
    assert_eq!(ids.len(), 26);
}

#[test]
fn qwen_inserts_its_default_system_prompt() {
    let prompt = template(QWEN).render(&[Message::user("hi")], true).unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n\
         <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn qwen_wraps_tool_results_in_tool_response() {
    let messages = [
        Message::system("S"),
        Message::user("U"),
        Message::assistant("{\"action\": \"sql\"}"),
        Message::tool("3 rows"),
        Message::tool("second result"),
        Message::assistant("done"),
        Message::tool("late"),
    ];
    let prompt = template(QWEN).render(&messages, false).unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nS<|im_end|>\n\
         <|im_start|>user\nU<|im_end|>\n\
         <|im_start|>assistant\n{\"action\": \"sql\"}<|im_end|>\n\
         <|im_start|>user\n<tool_response>\n3 rows\n</tool_response>\n<tool_response>\nsecond result\n</tool_response><|im_end|>\n\
         <|im_start|>assistant\ndone<|im_end|>\n\
         <|im_start|>user\n<tool_response>\nlate\n</tool_response><|im_end|>\n"
    );
}

#[test]
fn smollm_renders_system_and_user_as_chatml() {
    let chat = template(SMOL);
    assert_eq!(chat.source(), TemplateSource::Gguf);
    let prompt = chat
        .render(
            &[
                Message::system("You are a helpful assistant."),
                Message::user("What is 2+2?"),
            ],
            true,
        )
        .unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n\
         <|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn smollm_inserts_its_default_system_prompt_and_uses_role_tool() {
    let prompt = template(SMOL)
        .render(
            &[
                Message::user("hi"),
                Message::assistant("call"),
                Message::tool("42"),
            ],
            true,
        )
        .unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
         <|im_start|>user\nhi<|im_end|>\n\
         <|im_start|>assistant\ncall<|im_end|>\n\
         <|im_start|>tool\n42<|im_end|>\n\
         <|im_start|>assistant\n"
    );
}

#[test]
fn without_generation_prompt_the_text_ends_after_the_last_turn() {
    let prompt = template(SMOL)
        .render(&[Message::system("S"), Message::user("U")], false)
        .unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
    );
}

#[test]
fn builtin_chatml_renders() {
    let chat = ChatTemplate::chatml();
    assert_eq!(chat.source(), TemplateSource::Fallback("chatml"));
    assert!(chat.is_fallback());
    let prompt = chat
        .render(&[Message::system("S"), Message::tool("T")], true)
        .unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>tool\nT<|im_end|>\n<|im_start|>assistant\n"
    );
}

fn fallback_for(extra_tokens: &[&str]) -> Result<ChatTemplate, TemplateError> {
    let content = tiny_gguf(&tiny_tokenizer_metadata(extra_tokens));
    assert!(!content.metadata.contains_key("tokenizer.chat_template"));
    let tokenizer = Tokenizer::from_gguf(&content).unwrap();
    ChatTemplate::from_gguf(&content, &tokenizer)
}

#[test]
fn file_without_template_gets_chatml_when_vocab_has_im_start() {
    let chat = fallback_for(&["<|im_start|>"]).unwrap();
    assert_eq!(chat.source(), TemplateSource::Fallback("chatml"));
    assert_eq!(
        chat.render(&[Message::user("x")], true).unwrap(),
        "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn file_without_template_gets_llama3_when_vocab_has_header_tokens() {
    let mut md = tiny_tokenizer_metadata(&[
        "<|begin_of_text|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eot_id|>",
    ]);
    md.push(("tokenizer.ggml.bos_token_id", Value::U32(5)));
    let content = tiny_gguf(&md);
    let tokenizer = Tokenizer::from_gguf(&content).unwrap();
    let chat = ChatTemplate::from_gguf(&content, &tokenizer).unwrap();
    assert_eq!(chat.source(), TemplateSource::Fallback("llama3"));
    assert_eq!(
        chat.render(
            &[
                Message::system("S"),
                Message::user(" U "),
                Message::tool("R")
            ],
            true
        )
        .unwrap(),
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>\
         <|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>\
         <|start_header_id|>ipython<|end_header_id|>\n\nR<|eot_id|>\
         <|start_header_id|>assistant<|end_header_id|>\n\n"
    );
}

#[test]
fn file_without_template_or_known_family_is_an_error() {
    let err = fallback_for(&[]).unwrap_err();
    assert!(matches!(err, TemplateError::NoTemplate), "{err:?}");
    assert!(err.to_string().contains("tokenizer.chat_template"), "{err}");
}

#[test]
fn template_that_does_not_parse_names_the_line() {
    let err = ChatTemplate::new(
        "{% for m in messages %}\n{{ m.content }}\n{% for %}",
        None,
        None,
    )
    .unwrap_err();
    match &err {
        TemplateError::Parse { line: Some(3), .. } => {}
        other => panic!("expected a parse error at line 3, got {other:?}"),
    }
    assert!(err.to_string().contains("line 3"), "{err}");
}

#[test]
fn raise_exception_in_a_template_is_a_render_error_with_its_message() {
    let chat = ChatTemplate::new(
        "{% if messages[0].role != 'user' %}\n{{ raise_exception('Conversation must start with user') }}\n{% endif %}",
        None,
        None,
    )
    .unwrap();
    assert!(chat.render(&[Message::user("ok")], true).is_ok());
    let err = chat.render(&[Message::system("no")], true).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, TemplateError::Render { line: Some(2), .. }),
        "{err:?}"
    );
    assert!(msg.contains("Conversation must start with user"), "{msg}");
}

#[test]
fn python_string_methods_tojson_and_special_variables_work() {
    let chat = ChatTemplate::new(
        "{{ bos_token }}{{ messages[0].content.strip().upper() }}|{{ messages[0].role | tojson }}|\
         {{ {'k': ['é<', 1]} | tojson }}|{{ tools is none }}|{{ eos_token }}",
        Some("<s>".into()),
        Some("</s>".into()),
    )
    .unwrap();
    assert_eq!(chat.source(), TemplateSource::Custom);
    let out = chat.render(&[Message::user("  hi  ")], true).unwrap();
    assert_eq!(out, "<s>HI|\"user\"|{\"k\": [\"é<\", 1]}|True|</s>");
}

#[test]
fn template_blocks_are_trimmed_like_transformers() {
    // trim_blocks and lstrip_blocks: block tags leave no newline or indentation behind.
    let chat = ChatTemplate::new("{% for m in messages %}\n    {% if true %}\n[{{ m.content }}]\n    {% endif %}\n{% endfor %}", None, None).unwrap();
    assert_eq!(
        chat.render(&[Message::user("a"), Message::user("b")], false)
            .unwrap(),
        "[a]\n[b]\n"
    );
}
