//! The token trie llguidance computes masks over, built once per model from cairn's own
//! [`Tokenizer`].
//!
//! Every id up to the model's embedding rows gets an entry: text tokens as the bytes they stand
//! for; control tokens (`<|im_start|>`) and user-defined `<...>` tokens behind toktrie's
//! special-token marker byte `0xFF`, so a grammar can never spell them out as text; ids the
//! tokenizer does not know (the padding rows past its vocabulary) as special names nothing
//! refers to, so they are never allowed. The end-of-turn token is the trie's EOS: the only id a
//! finished grammar allows.

use std::sync::Arc;

use toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};

use super::ConstraintError;
use crate::model::tokenizer::{TokenKind, Tokenizer};

/// End-of-turn tokens in order of preference. ChatML models list `<|endoftext|>` as well, but a
/// constrained reply inside a chat turn must close the turn.
const END_OF_TURN: &[&str] = &["<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>"];

/// cairn's tokenizer seen through toktrie's [`TokenizerEnv`].
struct CairnTokenizerEnv {
    trie: TokTrie,
    tokenizer: Tokenizer,
}

impl TokenizerEnv for CairnTokenizerEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.tokenize_with_greedy_fallback(s, |text| {
            self.tokenizer
                .encode(text)
                .unwrap_or_else(|_| self.trie.greedy_tokenize(text.as_bytes()))
        })
    }
}

/// The id a finished grammar allows: the first end-of-turn token the vocabulary has, else the
/// tokenizer's first end-of-generation id.
pub fn end_of_turn_id(tokenizer: &Tokenizer) -> Option<u32> {
    END_OF_TURN
        .iter()
        .filter_map(|t| tokenizer.id_of(t))
        .find(|id| tokenizer.eos_ids().contains(id))
        .or_else(|| tokenizer.eos_ids().first().copied())
}

/// The bytes of every id below `vocab`, special tokens behind the `0xFF` marker.
fn trie_words(tokenizer: &Tokenizer, vocab: usize) -> Vec<Vec<u8>> {
    (0..vocab as u32)
        .map(|id| {
            let bytes = tokenizer.token_bytes(id);
            let special = match tokenizer.token_kind(id) {
                None => true,
                Some(TokenKind::Control | TokenKind::Unknown) => true,
                Some(TokenKind::UserDefined) => bytes
                    .as_deref()
                    .is_some_and(|b| b.starts_with(b"<") && b.ends_with(b">")),
                Some(_) => false,
            };
            match bytes {
                Some(b) if !special => b,
                Some(b) if !b.is_empty() => [&[TokTrie::SPECIAL_TOKEN_MARKER], &b[..]].concat(),
                _ => {
                    let mut name = format!(".<[{id}]>").into_bytes();
                    name[0] = TokTrie::SPECIAL_TOKEN_MARKER;
                    name
                }
            }
        })
        .collect()
}

/// Builds the toktrie environment for a model with `vocab` embedding rows.
pub fn build_tok_env(tokenizer: &Tokenizer, vocab: usize) -> Result<TokEnv, ConstraintError> {
    if vocab < tokenizer.vocab_size() {
        return Err(ConstraintError::Vocab(format!(
            "the model has {vocab} embedding rows but the tokenizer has {} ids",
            tokenizer.vocab_size()
        )));
    }
    let eos = end_of_turn_id(tokenizer).ok_or_else(|| {
        ConstraintError::Vocab("the tokenizer has no end-of-generation token".into())
    })?;
    let mut info = TokRxInfo::new(vocab as u32, eos);
    info.tok_end_of_turn = Some(eos);
    info.tok_bos = tokenizer.bos_id();
    let trie = TokTrie::from(&info, &trie_words(tokenizer, vocab));
    Ok(Arc::new(CairnTokenizerEnv {
        trie,
        tokenizer: tokenizer.clone(),
    }))
}
