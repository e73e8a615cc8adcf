//! The tokenizer, built from the GGUF's own `tokenizer.ggml.*` metadata so that one file is the
//! whole model.
//!
//! [`Tokenizer::from_gguf`] reads the vocabulary (`tokenizer.ggml.tokens`), the BPE merges
//! (`tokenizer.ggml.merges`), the token types (`tokenizer.ggml.token_type`) and the
//! pre-tokenizer name (`tokenizer.ggml.pre`) and assembles a byte-level BPE
//! [`tokenizers::Tokenizer`] that splits text the way llama.cpp does for that pre-tokenizer, so
//! ids match llama.cpp's exactly (checked against vectors produced by llama.cpp in
//! `tests/data/tokens-*.jsonl`). [`Tokenizer::from_file`] loads a `tokenizer.json` instead (the
//! `--tokenizer` override).
//!
//! Control tokens such as `<|im_start|>` are parsed out of the text as one id each, so a rendered
//! chat template can be encoded as is. Nothing is added around the text: no BOS, no EOS (see
//! [`Tokenizer::add_bos`]).
//!
//! Decoding works on bytes: every id maps to the raw bytes it stands for
//! ([`Tokenizer::token_bytes`]), [`Tokenizer::decode`] joins them, and a [`StreamDecoder`]
//! turns ids into text one at a time without ever splitting a UTF-8 character.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel as ByteLevelPre;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior};

/// Pre-tokenizer names (`tokenizer.ggml.pre`) this module knows how to reproduce.
pub const SUPPORTED_PRE: &[&str] = &[
    "qwen2",
    "deepseek-r1-qwen",
    "smollm",
    "starcoder",
    "refact",
    "llama-bpe",
    "llama3",
    "smaug-bpe",
    "gpt2",
    "default",
];

/// Texts of end-of-generation tokens, recognised when they exist as control tokens.
const END_OF_GENERATION: &[&str] = &[
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<end_of_turn>",
];

/// Why a tokenizer could not be built or used.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A required GGUF metadata key is absent.
    #[error(
        "GGUF metadata has no `{key}`, so the file carries no usable tokenizer; \
         pass a tokenizer.json with --tokenizer"
    )]
    MissingKey {
        /// The missing key.
        key: &'static str,
    },
    /// A GGUF metadata key holds a value of the wrong shape.
    #[error("GGUF metadata key `{key}` is malformed: {reason}; the file may be damaged")]
    BadKey {
        /// The key.
        key: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// `tokenizer.ggml.model` names a tokenizer family other than byte-level BPE.
    #[error(
        "tokenizer model `{model}` (tokenizer.ggml.model) is not supported: only byte-level BPE \
         (`gpt2`) is; pass a tokenizer.json with --tokenizer"
    )]
    UnsupportedModel {
        /// The value of `tokenizer.ggml.model`.
        model: String,
    },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this module cannot reproduce.
    #[error(
        "pre-tokenizer `{pre}` (tokenizer.ggml.pre) is not supported; supported: {}; \
         pass a tokenizer.json with --tokenizer",
        SUPPORTED_PRE.join(", ")
    )]
    UnknownPre {
        /// The value of `tokenizer.ggml.pre`.
        pre: String,
    },
    /// The `tokenizers` library refused the assembled vocabulary, merges or splitting rules.
    #[error("cannot build the tokenizer from GGUF metadata: {0}")]
    Build(String),
    /// A tokenizer.json file could not be read or parsed.
    #[error("cannot load tokenizer file {}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        reason: String,
    },
    /// Encoding failed inside the `tokenizers` library.
    #[error("cannot encode text: {0}")]
    Encode(String),
    /// A token id outside the vocabulary was given to decode.
    #[error("token id {id} is outside the vocabulary (size {vocab_size})")]
    UnknownId {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
}

/// What a vocabulary entry is, after llama.cpp's `tokenizer.ggml.token_type` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Ordinary text (code 1, and any code this module does not know).
    Normal,
    /// The unknown token (code 2); treated like a control token.
    Unknown,
    /// A control token such as `<|im_start|>` (code 3): parsed as one id, special.
    Control,
    /// A user-defined token such as Qwen's `<tool_call>` (code 4): parsed as one id, plain text.
    UserDefined,
    /// A placeholder that never appears in text (code 5, e.g. `[PAD151665]`); decodes to nothing.
    Unused,
    /// A raw byte token (code 6); byte-level BPE treats it as ordinary text.
    Byte,
}

impl TokenKind {
    fn from_code(code: i64) -> Self {
        match code {
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => Self::Normal,
        }
    }

    fn is_special(self) -> bool {
        matches!(self, Self::Control | Self::Unknown)
    }
}

/// A byte-level BPE tokenizer with llama.cpp-compatible splitting. Cheap to clone (shared).
#[derive(Clone)]
pub struct Tokenizer {
    shared: Arc<Shared>,
}

struct Shared {
    hf: tokenizers::Tokenizer,
    /// The bytes each id stands for; control tokens as their text, unused ones empty.
    pieces: Vec<Vec<u8>>,
    kinds: Vec<TokenKind>,
    eos_ids: Vec<u32>,
    bos_id: Option<u32>,
    eos_id: Option<u32>,
    add_bos: bool,
    pre: String,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("pre", &self.shared.pre)
            .field("eos_ids", &self.shared.eos_ids)
            .finish()
    }
}

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(content: &Content) -> Result<Self, TokenizerError> {
        let md = &content.metadata;
        let model = required_str(md, "tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel {
                model: model.to_string(),
            });
        }
        let tokens = string_array(md, "tokenizer.ggml.tokens")?;
        let merges = string_array(md, "tokenizer.ggml.merges")?;
        let kinds = match md.get("tokenizer.ggml.token_type") {
            None => vec![TokenKind::Normal; tokens.len()],
            Some(value) => token_kinds(value, tokens.len())?,
        };
        // llama.cpp falls back to its "default" splitting when the key is absent.
        let pre = match md.get("tokenizer.ggml.pre") {
            None => "default".to_string(),
            Some(v) => as_str(v, "tokenizer.ggml.pre")?.to_string(),
        };
        let splitting = Splitting::for_pre(&pre)?;

        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(id, token)| (token.to_string(), id as u32))
            .collect();
        let merges = merges
            .iter()
            .map(|m| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| TokenizerError::BadKey {
                        key: "tokenizer.ggml.merges",
                        reason: format!("merge {m:?} is not two tokens separated by a space"),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .ignore_merges(splitting.ignore_merges)
            .build()
            .map_err(|e| TokenizerError::Build(e.to_string()))?;

        let mut hf = tokenizers::Tokenizer::new(bpe);
        hf.with_pre_tokenizer(Some(splitting.pre_tokenizer));
        hf.with_decoder(Some(ByteLevelDecoder::new(false, false, false)));
        // Control and user-defined tokens are matched in the raw text before splitting, as
        // llama.cpp does, so `<|im_start|>` becomes one id.
        let added: Vec<AddedToken> = tokens
            .iter()
            .zip(&kinds)
            .filter(|(_, kind)| kind.is_special() || **kind == TokenKind::UserDefined)
            .map(|(text, kind)| {
                AddedToken::from(text.to_string(), kind.is_special()).normalized(false)
            })
            .collect();
        hf.add_special_tokens(added)
            .map_err(|e| TokenizerError::Build(e.to_string()))?;

        let byte_of = unicode_to_byte();
        let pieces = tokens
            .iter()
            .zip(&kinds)
            .map(|(text, kind)| match kind {
                TokenKind::Control | TokenKind::Unknown | TokenKind::UserDefined => {
                    text.as_bytes().to_vec()
                }
                TokenKind::Unused => Vec::new(),
                TokenKind::Normal | TokenKind::Byte => byte_level_bytes(text, &byte_of),
            })
            .collect();

        let token_id = |key: &'static str| -> Result<Option<u32>, TokenizerError> {
            match md.get(key) {
                None => Ok(None),
                Some(v) => {
                    let id = as_u32(v, key)?;
                    if (id as usize) < tokens.len() {
                        Ok(Some(id))
                    } else {
                        Err(TokenizerError::BadKey {
                            key,
                            reason: format!(
                                "id {id} is outside the vocabulary of {}",
                                tokens.len()
                            ),
                        })
                    }
                }
            }
        };
        let bos_id = token_id("tokenizer.ggml.bos_token_id")?;
        let eos_id = token_id("tokenizer.ggml.eos_token_id")?;
        let eot_id = token_id("tokenizer.ggml.eot_token_id")?;
        let eom_id = token_id("tokenizer.ggml.eom_token_id")?;
        let add_bos = match md.get("tokenizer.ggml.add_bos_token") {
            None => false,
            Some(v) => v.to_bool().map_err(|e| TokenizerError::BadKey {
                key: "tokenizer.ggml.add_bos_token",
                reason: e.to_string(),
            })?,
        };

        let mut eos_ids: Vec<u32> = [eos_id, eot_id, eom_id].into_iter().flatten().collect();
        for (id, (text, kind)) in tokens.iter().zip(&kinds).enumerate() {
            if kind.is_special() && END_OF_GENERATION.contains(text) {
                eos_ids.push(id as u32);
            }
        }
        dedup_in_order(&mut eos_ids);

        Ok(Self {
            shared: Arc::new(Shared {
                hf,
                pieces,
                kinds,
                eos_ids,
                bos_id,
                eos_id,
                add_bos,
                pre,
            }),
        })
    }

    /// Loads a Hugging Face `tokenizer.json` (the `--tokenizer` override). Special and
    /// end-of-generation tokens are taken from its added tokens, by their usual names.
    pub fn from_file(path: &Path) -> Result<Self, TokenizerError> {
        let file_error = |reason: String| TokenizerError::File {
            path: path.to_path_buf(),
            reason,
        };
        let hf = tokenizers::Tokenizer::from_file(path).map_err(|e| file_error(e.to_string()))?;

        let vocab = hf.get_vocab(true);
        let size = vocab.values().map(|&id| id as usize + 1).max().unwrap_or(0);
        let mut texts = vec![None; size];
        for (text, id) in vocab {
            texts[id as usize] = Some(text);
        }
        let mut kinds = vec![TokenKind::Normal; size];
        for (id, added) in hf.get_added_tokens_decoder() {
            if let Some(kind) = kinds.get_mut(id as usize) {
                *kind = if added.special {
                    TokenKind::Control
                } else {
                    TokenKind::UserDefined
                };
            }
        }

        let style = PieceStyle::of(&hf);
        let byte_of = unicode_to_byte();
        let pieces = texts
            .iter()
            .zip(&kinds)
            .map(|(text, kind)| match (text, kind) {
                (None, _) => Vec::new(),
                (Some(text), TokenKind::Normal) => match style {
                    PieceStyle::ByteLevel => byte_level_bytes(text, &byte_of),
                    PieceStyle::ByteFallback => byte_fallback_bytes(text),
                    PieceStyle::Raw => text.as_bytes().to_vec(),
                },
                (Some(text), _) => text.as_bytes().to_vec(),
            })
            .collect();

        let find = |names: &[&str]| -> Option<u32> {
            names.iter().find_map(|name| {
                let id = hf.token_to_id(name)?;
                kinds
                    .get(id as usize)
                    .filter(|k| k.is_special())
                    .map(|_| id)
            })
        };
        let eos_id = find(&[
            "<|im_end|>",
            "<|eot_id|>",
            "<|endoftext|>",
            "<|end_of_text|>",
            "</s>",
            "<eos>",
        ]);
        let bos_id = find(&["<|begin_of_text|>", "<s>", "<bos>"]);
        let mut eos_ids: Vec<u32> = eos_id.into_iter().collect();
        eos_ids.extend(
            END_OF_GENERATION
                .iter()
                .chain(&["</s>", "<eos>"])
                .filter_map(|t| find(&[t])),
        );
        dedup_in_order(&mut eos_ids);

        Ok(Self {
            shared: Arc::new(Shared {
                hf,
                pieces,
                kinds,
                eos_ids,
                bos_id,
                eos_id,
                add_bos: false,
                pre: "tokenizer.json".to_string(),
            }),
        })
    }

    /// Encodes text into ids. Control tokens written in the text (`<|im_start|>`) become one id
    /// each; no BOS or EOS is added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let encoding = self
            .shared
            .hf
            .encode_fast(text, false)
            .map_err(|e| TokenizerError::Encode(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Decodes ids back into text, the exact inverse of [`Tokenizer::encode`]; control tokens
    /// appear as their text. Bytes that are not valid UTF-8 become U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend_from_slice(self.piece(id).ok_or(TokenizerError::UnknownId {
                id,
                vocab_size: self.vocab_size(),
            })?);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The number of ids in the vocabulary (control tokens included).
    pub fn vocab_size(&self) -> usize {
        self.shared.pieces.len()
    }

    /// The raw bytes one id stands for: byte-level decoded for text tokens, the token's text for
    /// control and user-defined tokens, empty for unused placeholders. `None` outside the
    /// vocabulary.
    pub fn token_bytes(&self, id: u32) -> Option<Vec<u8>> {
        self.piece(id).map(<[u8]>::to_vec)
    }

    fn piece(&self, id: u32) -> Option<&[u8]> {
        self.shared.pieces.get(id as usize).map(Vec::as_slice)
    }

    /// The id of a vocabulary entry, written as stored (`<|im_end|>`, or `Ġhello` for " hello").
    pub fn id_of(&self, token: &str) -> Option<u32> {
        self.shared.hf.token_to_id(token)
    }

    /// Every id that ends generation: the GGUF's EOS (and EOT/EOM when given) first, then the
    /// control tokens `<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`, `<|end_of_text|>` and the like
    /// when they exist.
    pub fn eos_ids(&self) -> &[u32] {
        &self.shared.eos_ids
    }

    /// The id of `tokenizer.ggml.bos_token_id`, if the file names one.
    pub fn bos_id(&self) -> Option<u32> {
        self.shared.bos_id
    }

    /// The id of `tokenizer.ggml.eos_token_id`, if the file names one.
    pub fn eos_id(&self) -> Option<u32> {
        self.shared.eos_id
    }

    /// The text of the BOS token (the chat template's `bos_token`).
    pub fn bos_token(&self) -> Option<String> {
        self.shared
            .bos_id
            .and_then(|id| self.shared.hf.id_to_token(id))
    }

    /// The text of the EOS token (the chat template's `eos_token`).
    pub fn eos_token(&self) -> Option<String> {
        self.shared
            .eos_id
            .and_then(|id| self.shared.hf.id_to_token(id))
    }

    /// Whether the model expects a BOS id before the prompt (`tokenizer.ggml.add_bos_token`).
    /// [`Tokenizer::encode`] never adds it: the caller prepends [`Tokenizer::bos_id`] when this
    /// is true and the rendered template did not already start with the BOS text.
    pub fn add_bos(&self) -> bool {
        self.shared.add_bos
    }

    /// Whether an id is a control token (`<|im_start|>`, `<|endoftext|>`), as opposed to text.
    pub fn is_special(&self, id: u32) -> bool {
        self.token_kind(id).is_some_and(TokenKind::is_special)
    }

    /// What kind of vocabulary entry an id is; `None` outside the vocabulary.
    pub fn token_kind(&self, id: u32) -> Option<TokenKind> {
        self.shared.kinds.get(id as usize).copied()
    }

    /// The pre-tokenizer in use (`tokenizer.ggml.pre`, or `tokenizer.json` for a loaded file).
    pub fn pre(&self) -> &str {
        &self.shared.pre
    }

    /// A decoder that turns ids into text one at a time, for streaming output.
    pub fn stream_decoder(&self) -> StreamDecoder {
        StreamDecoder {
            tokenizer: self.clone(),
            pending: Vec::new(),
        }
    }

    /// The underlying `tokenizers` tokenizer (byte-level decoder, control tokens as added
    /// special tokens), e.g. for building a token trie.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.shared.hf
    }
}

/// Incremental decoding: [`StreamDecoder::push`] one id at a time and get the text it completes.
///
/// Bytes of a UTF-8 character split over several tokens (common for CJK and emoji) are held
/// back until the character is whole, so the pieces joined equal [`Tokenizer::decode`] of all
/// ids once [`StreamDecoder::finish`] has flushed what is left.
#[derive(Debug, Clone)]
pub struct StreamDecoder {
    tokenizer: Tokenizer,
    pending: Vec<u8>,
}

impl StreamDecoder {
    /// Adds one id; returns the text it completes, or `None` when nothing new is whole yet.
    /// An id outside the vocabulary is an error and leaves the decoder as it was.
    pub fn push(&mut self, id: u32) -> Result<Option<String>, TokenizerError> {
        let piece = self.tokenizer.piece(id).ok_or(TokenizerError::UnknownId {
            id,
            vocab_size: self.tokenizer.vocab_size(),
        })?;
        self.pending.extend_from_slice(piece);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(text) => {
                    out.push_str(text);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // The prefix is valid UTF-8 by construction of `valid_up_to`.
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // An incomplete character at the end: wait for the next token.
                        None => {
                            self.pending.drain(..valid);
                            break;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
        Ok((!out.is_empty()).then_some(out))
    }

    /// Flushes bytes still held back (an unfinished character becomes U+FFFD) and resets.
    pub fn finish(&mut self) -> Option<String> {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        (!out.is_empty()).then_some(out)
    }

    /// Whether bytes of an unfinished character are being held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}

/// How a pre-tokenizer name turns into `tokenizers` splitting rules.
struct Splitting {
    pre_tokenizer: PreTokenizerWrapper,
    ignore_merges: bool,
}

// The regexes are llama.cpp's (llama-vocab.cpp, `llm_tokenizer_bpe`), which are the ones in each
// model's tokenizer.json with `(?i:...)` spelled out.
const REGEX_QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const REGEX_LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const REGEX_GPT2: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

impl Splitting {
    fn for_pre(pre: &str) -> Result<Self, TokenizerError> {
        // No prefix space anywhere: llama.cpp never adds one for byte-level BPE.
        let byte_level = || ByteLevelPre::new(false, false, false).into();
        let (regexes, ignore_merges): (&[&str], bool) = match pre {
            "qwen2" | "deepseek-r1-qwen" => (&[REGEX_QWEN2], false),
            // llama.cpp sets ignore_merges for the Llama 3 family only.
            "llama-bpe" | "llama3" => (&[REGEX_LLAMA3], true),
            "smaug-bpe" => (&[REGEX_LLAMA3], false),
            "smollm" | "starcoder" | "refact" => (&[r"\p{N}", REGEX_GPT2], false),
            "gpt2" => (&[REGEX_GPT2], false),
            "default" => (
                &[
                    r"[\p{P}\$\+<=>\^~\|]+",
                    REGEX_GPT2,
                    r"\p{N}+",
                    "[0-9][0-9][0-9]",
                ],
                false,
            ),
            other => {
                return Err(TokenizerError::UnknownPre {
                    pre: other.to_string(),
                })
            }
        };
        let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
        for regex in regexes {
            let split = Split::new(
                SplitPattern::Regex((*regex).to_string()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|e| TokenizerError::Build(format!("pre-tokenizer regex {regex:?}: {e}")))?;
            steps.push(split.into());
        }
        steps.push(byte_level());
        Ok(Self {
            pre_tokenizer: Sequence::new(steps).into(),
            ignore_merges,
        })
    }
}

/// How the vocabulary of a loaded tokenizer.json spells bytes.
#[derive(Clone, Copy)]
enum PieceStyle {
    /// GPT-2 byte-to-unicode mapping (`Ġ` for a space).
    ByteLevel,
    /// SentencePiece style: `▁` for a space, `<0xNN>` for raw bytes.
    ByteFallback,
    /// Tokens are their text.
    Raw,
}

impl PieceStyle {
    fn of(hf: &tokenizers::Tokenizer) -> Self {
        fn decoder_style(d: &DecoderWrapper) -> Option<PieceStyle> {
            match d {
                DecoderWrapper::ByteLevel(_) => Some(PieceStyle::ByteLevel),
                DecoderWrapper::ByteFallback(_) | DecoderWrapper::Metaspace(_) => {
                    Some(PieceStyle::ByteFallback)
                }
                DecoderWrapper::Sequence(seq) => seq.get_decoders().iter().find_map(decoder_style),
                _ => None,
            }
        }
        hf.get_decoder()
            .and_then(decoder_style)
            .or_else(|| match hf.get_pre_tokenizer() {
                Some(PreTokenizerWrapper::ByteLevel(_)) => Some(Self::ByteLevel),
                _ => None,
            })
            .unwrap_or(Self::Raw)
    }
}

/// GPT-2's byte-to-unicode table, inverted: the printable stand-in character for each byte.
fn unicode_to_byte() -> HashMap<char, u8> {
    let mut map = HashMap::with_capacity(256);
    let mut next_free = 256u32;
    for byte in 0u8..=255 {
        let printable = matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let code = if printable {
            u32::from(byte)
        } else {
            next_free += 1;
            next_free - 1
        };
        if let Some(c) = char::from_u32(code) {
            map.insert(c, byte);
        }
    }
    map
}

/// The bytes of a byte-level token; a character outside the table (not produced by GPT-2 style
/// vocabularies) stands for its own UTF-8.
fn byte_level_bytes(text: &str, byte_of: &HashMap<char, u8>) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(text.len());
    for c in text.chars() {
        match byte_of.get(&c) {
            Some(&b) => bytes.push(b),
            None => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    bytes
}

/// The bytes of a SentencePiece-style token: `<0xNN>` is one byte, `▁` a space.
fn byte_fallback_bytes(text: &str) -> Vec<u8> {
    if let Some(hex) = text.strip_prefix("<0x").and_then(|t| t.strip_suffix('>')) {
        if let Ok(byte) = u8::from_str_radix(hex, 16) {
            return vec![byte];
        }
    }
    text.replace('\u{2581}', " ").into_bytes()
}

fn dedup_in_order(ids: &mut Vec<u32>) {
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(*id));
}

fn as_str<'a>(value: &'a Value, key: &'static str) -> Result<&'a str, TokenizerError> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(TokenizerError::BadKey {
            key,
            reason: format!("expected a string, found {:?}", other.value_type()),
        }),
    }
}

fn required_str<'a>(
    md: &'a HashMap<String, Value>,
    key: &'static str,
) -> Result<&'a str, TokenizerError> {
    as_str(md.get(key).ok_or(TokenizerError::MissingKey { key })?, key)
}

fn string_array<'a>(
    md: &'a HashMap<String, Value>,
    key: &'static str,
) -> Result<Vec<&'a str>, TokenizerError> {
    match md.get(key).ok_or(TokenizerError::MissingKey { key })? {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s.as_str()),
                other => Err(TokenizerError::BadKey {
                    key,
                    reason: format!("element {i} is {:?}, not a string", other.value_type()),
                }),
            })
            .collect(),
        other => Err(TokenizerError::BadKey {
            key,
            reason: format!(
                "expected an array of strings, found {:?}",
                other.value_type()
            ),
        }),
    }
}

fn as_integer(value: &Value) -> Option<i64> {
    match *value {
        Value::U8(v) => Some(v.into()),
        Value::I8(v) => Some(v.into()),
        Value::U16(v) => Some(v.into()),
        Value::I16(v) => Some(v.into()),
        Value::U32(v) => Some(v.into()),
        Value::I32(v) => Some(v.into()),
        Value::U64(v) => i64::try_from(v).ok(),
        Value::I64(v) => Some(v),
        _ => None,
    }
}

fn as_u32(value: &Value, key: &'static str) -> Result<u32, TokenizerError> {
    as_integer(value)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| TokenizerError::BadKey {
            key,
            reason: format!("expected a token id, found {value:?}"),
        })
}

fn token_kinds(value: &Value, n_tokens: usize) -> Result<Vec<TokenKind>, TokenizerError> {
    const KEY: &str = "tokenizer.ggml.token_type";
    let Value::Array(items) = value else {
        return Err(TokenizerError::BadKey {
            key: KEY,
            reason: format!(
                "expected an array of integers, found {:?}",
                value.value_type()
            ),
        });
    };
    if items.len() != n_tokens {
        return Err(TokenizerError::BadKey {
            key: KEY,
            reason: format!("{} entries for {n_tokens} tokens", items.len()),
        });
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            as_integer(item)
                .map(TokenKind::from_code)
                .ok_or_else(|| TokenizerError::BadKey {
                    key: KEY,
                    reason: format!("element {i} is {:?}, not an integer", item.value_type()),
                })
        })
        .collect()
}
