//! Where steps come from: the [`Policy`] trait, the model behind it ([`ModelPolicy`]), and a
//! scripted stand-in for testing the loop's control logic ([`ScriptedPolicy`]).

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use serde_json::Value;

use super::AgentError;
use crate::constrain::{Constraint, ConstraintCompiler, ConstraintSpec};
use crate::decode::Decoder;
use crate::model::sampling::SamplingParams;
use crate::model::template::{Message, Role};
use crate::model::LoadedModel;

/// One output decoded under a schema, with what it cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decoded {
    /// The text (JSON valid against the schema when `complete`).
    pub text: String,
    /// Whether the output is a whole value of the schema (false: the token limit cut it).
    pub complete: bool,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Of those, tokens reused from the KV cache.
    pub reused_tokens: usize,
    /// Tokens generated (sampled and forced).
    pub generated_tokens: usize,
    /// Tokens picked by sampling.
    pub sampled_tokens: usize,
    /// Tokens forced by the schema.
    pub forced_tokens: usize,
    /// Time to process the prompt and pick the first token, in ms.
    pub prefill_ms: f64,
    /// Time to decode the rest, in ms.
    pub decode_ms: f64,
    /// Of the whole generation, the time spent computing the constraint's token masks, in ms.
    pub mask_ms: f64,
}

/// The grammar of a plan: text that starts with a letter and holds no braces (so no JSON).
const PLAN_GRAMMAR: &str = "start: PLAN\nPLAN: /[A-Za-z][^{}]{0,3000}/\n";

/// What decides the agent's next step.
pub trait Policy {
    /// The length in tokens of a prompt made of `messages` (with the generation prompt).
    fn prompt_tokens(&mut self, messages: &[Message]) -> Result<usize, AgentError>;
    /// The model's context length in tokens.
    fn context(&self) -> usize;
    /// Decodes one JSON value valid against `schema`, at most `max_tokens` long, as the
    /// assistant's reply to `messages`.
    fn decode(
        &mut self,
        messages: &[Message],
        schema: &Value,
        max_tokens: usize,
    ) -> Result<Decoded, AgentError>;
    /// Generates free text, at most `max_tokens` long, as the assistant's reply to
    /// `messages` (the plan before round 1). A policy that cannot returns `None`, and the
    /// loop goes on without a plan.
    fn decode_text(
        &mut self,
        _messages: &[Message],
        _max_tokens: usize,
    ) -> Result<Option<Decoded>, AgentError> {
        Ok(None)
    }
}

/// The local model as the agent's policy: the conversation is kept as tokens in one
/// [`Decoder`]'s session, so a round only prefills what is new since the last (the system text
/// and tools are computed once per process and reused by every task), and each step is decoded
/// under its schema with fast-forward of forced tokens.
pub struct ModelPolicy {
    decoder: Decoder,
    /// Generated text → the ids that produced it, so a step is fed back exactly as decoded.
    generated: HashMap<String, Vec<u32>>,
    /// The last prompt encoded, to avoid encoding it twice (budget check, then decode).
    last: Option<(Vec<Message>, Vec<u32>)>,
}

impl ModelPolicy {
    /// A policy on `lm` that samples with `sampling` (greedy by default). Builds the token
    /// trie of the constraint engine once (about half a second for a 150k vocabulary).
    pub fn new(lm: LoadedModel, sampling: SamplingParams) -> Result<Self, AgentError> {
        Ok(Self::from_decoder(Decoder::new(lm, sampling)?))
    }

    fn from_decoder(decoder: Decoder) -> Self {
        ModelPolicy {
            decoder,
            generated: HashMap::new(),
            last: None,
        }
    }

    /// This policy with prefix reuse on or off (off: every round re-prefills its whole prompt,
    /// for measuring what reuse saves).
    pub fn with_prefix_reuse(mut self, reuse: bool) -> Self {
        self.decoder.set_prefix_reuse(reuse);
        self
    }

    /// Turns prefix reuse on or off for the following decodes.
    pub fn set_prefix_reuse(&mut self, reuse: bool) {
        self.decoder.set_prefix_reuse(reuse);
    }

    /// Empties the KV cache: the next decode prefills its whole prompt.
    pub fn clear_cache(&mut self) {
        self.decoder.clear_cache();
    }

    /// Builds a policy on `lm` with an already built constraint compiler (batch jobs share
    /// one token trie).
    pub fn with_compiler(
        lm: LoadedModel,
        compiler: ConstraintCompiler,
        sampling: SamplingParams,
    ) -> Self {
        Self::from_decoder(Decoder::with_compiler(lm, compiler, sampling))
    }

    /// Decodes the reply to `messages` without any schema, until the end of the turn or
    /// `max_tokens`: the naive baseline's way of asking for a step.
    pub fn decode_free(
        &mut self,
        messages: &[Message],
        max_tokens: usize,
    ) -> Result<Decoded, AgentError> {
        self.run(messages, max_tokens, None)
    }

    /// One generation from `messages`, under `constraint` when given, with the generated ids
    /// remembered so the reply is fed back exactly as decoded.
    fn run(
        &mut self,
        messages: &[Message],
        max_tokens: usize,
        constraint: Option<&mut Constraint>,
    ) -> Result<Decoded, AgentError> {
        let ids = self.encode(messages)?;
        let constrained = constraint.is_some();
        let mut constraint = constraint;
        let start = Instant::now();
        let g = self
            .decoder
            .generate(&ids, max_tokens, constraint.as_deref_mut())?;
        let mask_ms = constraint.map_or(0.0, |c| {
            c.mask_times().iter().map(|d| d.as_secs_f64()).sum::<f64>() * 1000.0
        });
        let total_ms = start.elapsed().as_secs_f64() * 1000.0;
        if self.generated.len() >= 4096 {
            self.generated.clear();
        }
        self.generated.insert(g.text.clone(), g.tokens.clone());
        let prefill_ms = g.time_to_first_token.as_secs_f64() * 1000.0;
        Ok(Decoded {
            complete: if constrained {
                !g.incomplete
            } else {
                g.stop == crate::decode::generate::StopReason::Eos
            },
            prompt_tokens: ids.len(),
            reused_tokens: g.reused_tokens,
            generated_tokens: g.tokens.len(),
            sampled_tokens: g.sampled_tokens,
            forced_tokens: g.forced_tokens,
            prefill_ms,
            decode_ms: (total_ms - prefill_ms).max(0.0),
            mask_ms,
            text: g.text,
        })
    }

    /// The loaded model.
    pub fn model(&self) -> &LoadedModel {
        self.decoder.model()
    }

    /// The prompt as token ids. Messages are rendered with the chat template one at a time and
    /// each new piece is encoded on its own, so earlier messages always give the same ids; an
    /// assistant message the model wrote keeps the exact ids it was decoded as. Both keep the
    /// prompt a strict extension of what the KV cache holds. A template whose renderings are
    /// not prefixes of each other is encoded whole.
    fn encode(&mut self, messages: &[Message]) -> Result<Vec<u32>, AgentError> {
        if let Some((m, ids)) = &self.last {
            if m == messages {
                return Ok(ids.clone());
            }
        }
        let lm = self.decoder.model();
        let tok = &lm.tokenizer;
        let mut ids = Vec::new();
        if tok.add_bos() {
            if let Some(b) = tok.bos_id() {
                ids.push(b);
            }
        }
        let mut prev = String::new();
        let mut incremental = true;
        for i in 0..messages.len() {
            let text = lm.template.render(&messages[..=i], false)?;
            let Some(piece) = text.strip_prefix(prev.as_str()) else {
                incremental = false;
                break;
            };
            let m = &messages[i];
            let spliced = (m.role == Role::Assistant)
                .then(|| self.generated.get(&m.content))
                .flatten()
                .and_then(|gen| {
                    let at = piece.find(&m.content)?;
                    Some((at, gen))
                });
            match spliced {
                Some((at, gen)) => {
                    ids.extend(tok.encode(&piece[..at])?);
                    ids.extend_from_slice(gen);
                    ids.extend(tok.encode(&piece[at + m.content.len()..])?);
                }
                None => ids.extend(tok.encode(piece)?),
            }
            prev = text;
        }
        let full = lm.template.render(messages, true)?;
        match full.strip_prefix(prev.as_str()) {
            Some(rest) if incremental => ids.extend(tok.encode(rest)?),
            _ => {
                ids.truncate(usize::from(tok.add_bos() && tok.bos_id().is_some()));
                ids.extend(tok.encode(&full)?);
            }
        }
        self.last = Some((messages.to_vec(), ids.clone()));
        Ok(ids)
    }

    fn constraint(&mut self, schema: &Value) -> Result<Constraint, AgentError> {
        let key = schema.to_string();
        let spec = ConstraintSpec::JsonSchema(schema.clone());
        Ok(self
            .decoder
            .constraint(&key, |c| c.compile(&spec, "agent step schema"))?)
    }
}

impl Policy for ModelPolicy {
    fn prompt_tokens(&mut self, messages: &[Message]) -> Result<usize, AgentError> {
        Ok(self.encode(messages)?.len())
    }

    fn context(&self) -> usize {
        self.decoder.model().model.config.context
    }

    fn decode(
        &mut self,
        messages: &[Message],
        schema: &Value,
        max_tokens: usize,
    ) -> Result<Decoded, AgentError> {
        let mut constraint = self.constraint(schema)?;
        self.run(messages, max_tokens, Some(&mut constraint))
    }

    /// Prose only: the grammar forbids braces, so a model used to answering in JSON steps
    /// (every assistant turn of its examples is one) writes its plan as text.
    fn decode_text(
        &mut self,
        messages: &[Message],
        max_tokens: usize,
    ) -> Result<Option<Decoded>, AgentError> {
        let mut constraint = self.decoder.constraint(PLAN_GRAMMAR, |c| {
            c.compile(
                &ConstraintSpec::Lark(PLAN_GRAMMAR.to_string()),
                "plan grammar",
            )
        })?;
        self.run(messages, max_tokens, Some(&mut constraint))
            .map(Some)
    }
}

/// A policy that returns fixed outputs in order, standing in for the model in tests of the
/// loop's control logic (circuit breaker, dead loops, retries, budget, stop reasons). Each
/// output must be valid against the schema the loop offers at that point: an output the
/// schema forbids is an error, exactly as the model could never produce it. It counts prompt
/// tokens as one per four characters of each message plus four, and its context is set by
/// the test.
#[derive(Debug, Clone)]
pub struct ScriptedPolicy {
    steps: VecDeque<Value>,
    context: usize,
    /// Every prompt it was asked to decode from, in order.
    pub prompts: Vec<Vec<Message>>,
    /// Every schema it was given, in order.
    pub schemas: Vec<Value>,
}

impl ScriptedPolicy {
    /// A policy that answers with `steps` in order, with a context of `context` tokens.
    pub fn new(steps: Vec<Value>, context: usize) -> Self {
        ScriptedPolicy {
            steps: steps.into(),
            context,
            prompts: Vec::new(),
            schemas: Vec::new(),
        }
    }

    /// Steps not used yet.
    pub fn remaining(&self) -> usize {
        self.steps.len()
    }
}

/// The scripted policy's token count: a quarter of the characters, plus four per message.
pub fn scripted_tokens(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|m| m.content.chars().count().div_ceil(4) + 4)
        .sum()
}

impl Policy for ScriptedPolicy {
    fn prompt_tokens(&mut self, messages: &[Message]) -> Result<usize, AgentError> {
        Ok(scripted_tokens(messages))
    }

    fn context(&self) -> usize {
        self.context
    }

    fn decode(
        &mut self,
        messages: &[Message],
        schema: &Value,
        max_tokens: usize,
    ) -> Result<Decoded, AgentError> {
        self.prompts.push(messages.to_vec());
        self.schemas.push(schema.clone());
        let step = self.steps.pop_front().ok_or_else(|| {
            AgentError::Script(format!(
                "the script has no step left for prompt {}",
                self.prompts.len()
            ))
        })?;
        if let Err(errors) = crate::tools::schema::validate(schema, &step) {
            let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            return Err(AgentError::Script(format!(
                "scripted step {} is not allowed by the schema offered: {}",
                self.prompts.len(),
                list.join("; ")
            )));
        }
        let text = step.to_string();
        let generated = text.len().div_ceil(4);
        let complete = generated <= max_tokens;
        let text = if complete {
            text
        } else {
            text.chars().take(max_tokens * 4).collect()
        };
        Ok(Decoded {
            complete,
            prompt_tokens: scripted_tokens(messages),
            generated_tokens: generated.min(max_tokens),
            sampled_tokens: generated.min(max_tokens),
            text,
            ..Decoded::default()
        })
    }
}
