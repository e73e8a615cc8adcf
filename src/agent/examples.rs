//! Worked examples chosen per task. Small models copy the pattern they are shown: one fixed
//! example (a calculator call) taught the 0.5B model to answer every word problem with one
//! expression and to repeat the example's answer sentence ("The shop sells 126 bottles…") in
//! unrelated tasks. So the loop keeps a bank of whole worked tasks of different kinds (a
//! multi-step word problem, a lookup, a lookup then arithmetic, the days between two dates, a
//! search, a search then arithmetic, a count, no tool at all), over data of their own (a
//! theatre, a bakery) that is not the user's, and shows the one closest to the task: BM25 over
//! each example's task text and a few words typical of its kind, among the examples whose
//! tools are all available and whose words the task holds ([`Example::needs`]).

use std::collections::HashSet;

use super::prompt::observation_text;
use crate::model::template::Message;
use crate::tools::ToolInfo;

/// One worked task: the task, its steps (the step JSON and the tool's result), the final
/// answer step, and what it is chosen by.
pub struct Example {
    /// A short name, for the trace.
    pub name: &'static str,
    /// The task text.
    pub task: &'static str,
    /// Words typical of tasks of this kind, added to the task text for ranking.
    pub cues: &'static str,
    /// The tools the example calls.
    pub tools: &'static [&'static str],
    /// (step JSON, tool, result) per tool call, in order.
    pub calls: &'static [(&'static str, &'static str, &'static str)],
    /// The final step JSON.
    pub answer: &'static str,
    /// The names and words of the example's own data ("Blue Hall", "seats"): an answer that
    /// holds one the task and its results do not is the example copied ([`echoed`]).
    pub own: &'static [&'static str],
    /// Groups of words: a task must hold a word of each group for the example to be shown
    /// (no groups: any task). The days between two dates are worth showing for a task that
    /// asks for days and relates two times ("days … after", "days … take"), not for every
    /// task that says "days" ("within how many days can goods be returned") or "before"
    /// ("before VAT").
    pub needs: &'static [&'static [&'static str]],
}

/// The bank.
pub const BANK: &[Example] = &[
    // The word problems first as the `reason` action works them (chosen when it is offered:
    // on equal scores the first example wins), then as calculator steps.
    Example {
        name: "word_problem_reasoned",
        task: "A bakery bakes 45 rolls an hour for 6 hours. It sells all of them but 38. How many rolls does it sell?",
        cues: "each every per total left remaining more less times half twice buys sells gives has had spends pays earns costs how many much if then after altogether",
        tools: &["reason"],
        calls: &[(
            r#"{"thought":"A word problem with several steps: reason it through, each calculation checked.","action":"reason","args":{}}"#,
            "reason",
            "The bakery bakes 45 rolls an hour for 6 hours:\n45 * 6 = 270 rolls baked.\nIt sells all of them but 38:\n270 - 38 = 232 rolls sold.\nAnswer: 232",
        )],
        answer: r#"{"thought":"The reasoning found 232 rolls sold.","action":"final_answer","args":{"answer":"The bakery sells 232 rolls."}}"#,
        own: &["bakery", "bakes", "rolls"],
        needs: &[],
    },
    Example {
        name: "percent_problem_reasoned",
        task: "A coat costs 80 euros. Its price is cut by 15%, then a 10 euro voucher is used. What is paid?",
        cues: "percent discount reduced increase off sale rate share fraction ratio average",
        tools: &["reason"],
        calls: &[(
            r#"{"thought":"Two steps of arithmetic: reason it through, each calculation checked.","action":"reason","args":{}}"#,
            "reason",
            "The price is cut by 15%, so 85% of it is left:\n80 * 0.85 = 68 euros.\nThe voucher takes 10 euros off:\n68 - 10 = 58 euros.\nAnswer: 58 euros",
        )],
        answer: r#"{"thought":"The reasoning found 58 euros.","action":"final_answer","args":{"answer":"58 euros is paid for the coat."}}"#,
        own: &["coat", "voucher"],
        needs: &[],
    },
    Example {
        name: "word_problem",
        task: "A bakery bakes 45 rolls an hour for 6 hours. It sells all of them but 38. How many rolls does it sell?",
        cues: "each every per total left remaining more less times half twice buys sells gives has had spends pays earns costs how many much if then after altogether",
        tools: &["calculator"],
        calls: &[
            (
                r#"{"thought":"Steps: rolls baked = 45 per hour times 6 hours; rolls sold = rolls baked minus the 38 not sold. First, rolls baked.","action":"calculator","args":{"expression":"45 * 6"}}"#,
                "calculator",
                "270",
            ),
            (
                r#"{"thought":"It bakes 270 rolls. Sold = 270 minus 38.","action":"calculator","args":{"expression":"270 - 38"}}"#,
                "calculator",
                "232",
            ),
        ],
        answer: r#"{"thought":"270 baked, 38 not sold: 232 sold.","action":"final_answer","args":{"answer":"The bakery sells 232 rolls."}}"#,
        own: &["bakery", "bakes", "rolls"],
        needs: &[],
    },
    Example {
        name: "arithmetic",
        task: "What is 48 * 25?",
        cues: "what is plus minus times divided by square root power of sum product compute calculate",
        tools: &["calculator"],
        calls: &[(
            r#"{"thought":"One operation: compute it with the calculator.","action":"calculator","args":{"expression":"48 * 25"}}"#,
            "calculator",
            "1200",
        )],
        answer: r#"{"thought":"The result answers the task.","action":"final_answer","args":{"answer":"48 * 25 = 1200."}}"#,
        own: &[],
        needs: &[],
    },
    Example {
        name: "percent_problem",
        task: "A coat costs 80 euros. Its price is cut by 15%, then a 10 euro voucher is used. What is paid?",
        cues: "percent discount reduced increase off sale rate share fraction ratio average",
        tools: &["calculator"],
        calls: &[
            (
                r#"{"thought":"Steps: the price after the 15% cut is 80 times 0.85; then 10 euros less. First, the cut price.","action":"calculator","args":{"expression":"80 * (1 - 0.15)"}}"#,
                "calculator",
                "68",
            ),
            (
                r#"{"thought":"After the cut the coat costs 68 euros; the voucher takes 10 off.","action":"calculator","args":{"expression":"68 - 10"}}"#,
                "calculator",
                "58",
            ),
        ],
        answer: r#"{"thought":"68 minus 10 is 58.","action":"final_answer","args":{"answer":"58 euros is paid for the coat."}}"#,
        own: &["coat", "voucher"],
        needs: &[],
    },
    Example {
        name: "lookup",
        task: "How many seats does the Blue Hall have?",
        cues: "which who what when price stock name city date list record table database",
        tools: &["sql"],
        calls: &[(
            r#"{"thought":"The halls table has each hall's seats; look up the Blue Hall.","action":"sql","args":{"query":"SELECT seats FROM halls WHERE name = 'Blue Hall'"}}"#,
            "sql",
            "seats\n420",
        )],
        answer: r#"{"thought":"The result gives the seats.","action":"final_answer","args":{"answer":"The Blue Hall has 420 seats."}}"#,
        own: &["Blue Hall", "seats", "halls"],
        needs: &[],
    },
    Example {
        name: "lookup_then_arithmetic",
        task: "What do 4 tickets for Hamlet cost?",
        cues: "cost total buy order times value worth together",
        tools: &["sql", "calculator"],
        calls: &[
            (
                r#"{"thought":"Steps: look up the ticket price of Hamlet, then multiply it by 4. First, the price.","action":"sql","args":{"query":"SELECT price FROM shows WHERE title = 'Hamlet'"}}"#,
                "sql",
                "price\n32.5",
            ),
            (
                r#"{"thought":"A ticket costs 32.5; 4 tickets cost 4 times that.","action":"calculator","args":{"expression":"4 * 32.5"}}"#,
                "calculator",
                "130",
            ),
        ],
        answer: r#"{"thought":"4 tickets at 32.5 cost 130.","action":"final_answer","args":{"answer":"4 tickets for Hamlet cost 130 euros."}}"#,
        own: &["Hamlet", "tickets", "ticket"],
        needs: &[],
    },
    Example {
        name: "dates_between",
        task: "How many days after it was made was booking 7 paid?",
        cues: "between after before since until passed elapsed took late later earlier date dates",
        tools: &["sql", "calculator"],
        calls: &[
            (
                r#"{"thought":"Steps: look up both dates of booking 7, then take the earlier date from the later one with the calculator. First, the dates.","action":"sql","args":{"query":"SELECT made_on, paid_on FROM bookings WHERE booking_id = 7"}}"#,
                "sql",
                "made_on | paid_on\n2024-03-02 | 2024-04-14",
            ),
            (
                r#"{"thought":"The days between two dates are the later date minus the earlier one.","action":"calculator","args":{"expression":"2024-04-14 - 2024-03-02"}}"#,
                "calculator",
                "43",
            ),
        ],
        answer: r#"{"thought":"From 2024-03-02 to 2024-04-14 is 43 days.","action":"final_answer","args":{"answer":"Booking 7 was paid 43 days after it was made."}}"#,
        own: &["booking", "bookings"],
        needs: &[
            &["day", "days", "weeks", "months"],
            &["after", "since", "until", "between", "take", "took", "late", "early", "later", "earlier"],
        ],
    },
    Example {
        name: "count",
        task: "How many shows are on in May 2024?",
        cues: "how many number of count most least highest lowest average sum per month year",
        tools: &["sql"],
        calls: &[(
            r#"{"thought":"Count the shows whose date is in May 2024; dates are written YYYY-MM-DD.","action":"sql","args":{"query":"SELECT COUNT(*) FROM shows WHERE date LIKE '2024-05-%'"}}"#,
            "sql",
            "COUNT(*)\n3",
        )],
        answer: r#"{"thought":"The count is 3.","action":"final_answer","args":{"answer":"3 shows are on in May 2024."}}"#,
        own: &[],
        needs: &[],
    },
    Example {
        name: "search",
        task: "How early should visitors arrive for a guided tour?",
        cues: "policy rule rules allowed must should how long days hours email contact phone says documents notes guide opening",
        tools: &["search"],
        calls: &[(
            r#"{"thought":"The visitor rules are in the documents; search them.","action":"search","args":{"query":"guided tour arrive"}}"#,
            "search",
            "visitors.md:4\n  Guided tours start on the hour. Please arrive 15 minutes early.",
        )],
        answer: r#"{"thought":"The rules say 15 minutes early.","action":"final_answer","args":{"answer":"Visitors should arrive 15 minutes before a guided tour."}}"#,
        own: &["guided tour", "visitors"],
        needs: &[],
    },
    Example {
        name: "search_then_arithmetic",
        task: "The cloakroom charges per item. What do 3 coats cost?",
        cues: "fee fees charge charges per night per day rate costs",
        tools: &["search", "calculator"],
        calls: &[
            (
                r#"{"thought":"Steps: find the cloakroom fee in the documents, then multiply it by 3. First, the fee.","action":"search","args":{"query":"cloakroom fee per item"}}"#,
                "search",
                "visitors.md:9\n  The cloakroom costs 1.50 euros per item.",
            ),
            (
                r#"{"thought":"The fee is 1.50 per item; 3 coats cost 3 times that.","action":"calculator","args":{"expression":"3 * 1.50"}}"#,
                "calculator",
                "4.5",
            ),
        ],
        answer: r#"{"thought":"3 items at 1.50 make 4.50.","action":"final_answer","args":{"answer":"3 coats cost 4.50 euros in the cloakroom."}}"#,
        own: &["cloakroom", "coats"],
        needs: &[],
    },
    Example {
        name: "direct",
        task: "Translate 'thank you' into German.",
        cues: "say translate opposite word meaning synonym capital define explain spell hello write name language",
        tools: &[],
        calls: &[],
        answer: r#"{"thought":"This needs no tool: it is general knowledge.","action":"final_answer","args":{"answer":"'Thank you' in German is 'Danke'."}}"#,
        own: &[],
        needs: &[],
    },
];

/// The example shown when no example shares a word with the task: the one that needs no tool.
const FALLBACK: &str = "direct";

/// Words too common to choose an example by.
const COMMON: &[&str] = &[
    "a", "an", "the", "is", "are", "was", "of", "to", "in", "on", "for", "and", "it", "its", "do",
    "does", "what", "i", "my", "me", "you", "your", "be", "at", "by", "with", "this", "that",
];

/// `text` with each arithmetic operator written as the word a task would use for it (`17 * 23`
/// reads `17 times 23`, and so does `17 x 23`), so that an expression ranks as arithmetic and
/// not only as "numbers".
/// A `-` counts as minus only between numbers (`80 - 15`), not in `e-mail` or `2-year`.
fn operators_as_words(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let near = |from: usize, step: isize| {
        let mut i = from as isize + step;
        while i >= 0 && (i as usize) < chars.len() && chars[i as usize] == ' ' {
            i += step;
        }
        (i >= 0 && (i as usize) < chars.len()).then(|| chars[i as usize])
    };
    let mut out = String::with_capacity(text.len() + 16);
    for (i, &c) in chars.iter().enumerate() {
        let word = match c {
            '*' | '\u{d7}' => Some(" times "),
            '+' => Some(" plus "),
            '/' | '\u{f7}' => Some(" divided by "),
            '^' => Some(" power "),
            // `7 x 6`: an x standing alone between numbers.
            'x' | 'X' => {
                let alone = i > 0
                    && chars[i - 1] == ' '
                    && chars.get(i + 1) == Some(&' ')
                    && near(i, -1).is_some_and(|b| b.is_ascii_digit() || b == ')')
                    && near(i, 1).is_some_and(|a| a.is_ascii_digit() || a == '(');
                alone.then_some(" times ")
            }
            '-' => {
                let before = near(i, -1).is_some_and(|b| b.is_ascii_digit() || b == ')');
                let after = near(i, 1).is_some_and(|a| a.is_ascii_digit() || a == '(');
                let spaced = i > 0 && chars[i - 1] == ' ';
                (before && after && spaced).then_some(" minus ")
            }
            _ => None,
        };
        match word {
            Some(w) => out.push_str(w),
            None => out.push(c),
        }
    }
    out
}

/// The words of `text` for ranking, lowercased, without [`COMMON`] ones; every number is the
/// one word `0`, so that a task holding numbers leans to the examples that compute with them;
/// operators count as their words ([`operators_as_words`]).
fn words(text: &str) -> Vec<String> {
    operators_as_words(text)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            if w.chars().all(|c| c.is_ascii_digit()) {
                "0".to_string()
            } else {
                w.to_lowercase()
            }
        })
        .filter(|w| !COMMON.contains(&w.as_str()))
        .collect()
}

/// The example of [`BANK`] closest to `task` among those whose tools are all in `tools`
/// (BM25, k1 = 1.2, b = 0.75, over each example's task and cues); the one that needs no tool
/// when none shares a word with the task (with no example at all, the 0.5B model went on
/// calling tools after the result that answered the task).
///
/// A task that names tools ("use the t.echo tool …") is shown only examples that call none
/// but those: an example calling another tool led the 0.5B model to that tool instead of
/// the one the user asked for.
pub fn choose(task: &str, tools: &[ToolInfo]) -> Option<&'static Example> {
    let have: HashSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let named = named_tools(task, tools);
    let numbers = holds_number(task);
    let said: HashSet<String> = task
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .collect();
    let usable: Vec<&Example> = BANK
        .iter()
        .filter(|e| e.tools.iter().all(|t| have.contains(t)))
        .filter(|e| named.is_empty() || e.tools.iter().all(|t| named.contains(t)))
        .filter(|e| numbers || !computes_alone(e))
        .filter(|e| {
            e.needs
                .iter()
                .all(|group| group.iter().any(|w| said.contains(*w)))
        })
        .collect();
    let docs: Vec<Vec<String>> = usable
        .iter()
        .map(|e| words(&format!("{} {}", e.task, e.cues)))
        .collect();
    if docs.is_empty() {
        return None;
    }
    let n = docs.len() as f64;
    let avg = docs.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let mut query = words(task);
    query.sort();
    query.dedup();
    let mut best: Option<(f64, usize)> = None;
    for (i, d) in docs.iter().enumerate() {
        let mut score = 0.0;
        for q in &query {
            let df = docs.iter().filter(|d| d.contains(q)).count() as f64;
            let tf = d.iter().filter(|w| *w == q).count() as f64;
            if tf == 0.0 {
                continue;
            }
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * d.len() as f64 / avg));
        }
        if score > 0.0 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, i));
        }
    }
    best.map(|(_, i)| usable[i])
        .or_else(|| BANK.iter().find(|e| e.name == FALLBACK))
}

/// Whether `e` works only with the task's own numbers (a word problem, arithmetic: it calls
/// the calculator or reasons, and looks nothing up).
fn computes_alone(e: &Example) -> bool {
    !e.tools.is_empty()
        && e.tools
            .iter()
            .all(|t| matches!(*t, "calculator" | "reason"))
}

/// Words that stand for a number in a task ("twice", "a dozen", "three").
const NUMBER_WORDS: &[&str] = &[
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "fifteen", "twenty", "thirty", "forty", "fifty", "hundred", "thousand", "million",
    "dozen", "half", "twice", "double", "triple", "quarter", "third",
];

/// Whether `task` holds a number, in digits or in words: with none, there is nothing for a
/// word problem's arithmetic to work on. Regression: "How many rounds does a task get by
/// default at most?" (over the user's documents) ranked the bakery's word problem first on
/// "how many", and the 1.5B model answered "45 rolls" without searching.
fn holds_number(task: &str) -> bool {
    task.chars().any(|c| c.is_ascii_digit())
        || task
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| NUMBER_WORDS.contains(&w))
}

/// The names of `tools` that `task` names as a tool: a name holding a `.`, `_` or `-`
/// (`t.echo`, `get_weather`) wherever it stands as a whole word, a plain name (`sql`,
/// `search`) only when the word "tool" follows it ("the search tool"), as plain names are
/// also everyday words ("search the notes").
fn named_tools<'a>(task: &str, tools: &'a [ToolInfo]) -> HashSet<&'a str> {
    let lower = task.to_lowercase();
    let is_name_char = |c: char| c.is_alphanumeric() || matches!(c, '.' | '_' | '-');
    let tokens: Vec<&str> = lower
        .split(|c: char| !is_name_char(c))
        .map(|t| t.trim_end_matches(['.', '-']))
        .filter(|t| !t.is_empty())
        .collect();
    let mut named = HashSet::new();
    for t in tools {
        let name = t.name.to_lowercase();
        let plain = name.chars().all(char::is_alphanumeric);
        let hit = tokens.iter().enumerate().any(|(i, tok)| {
            *tok == name && (!plain || tokens.get(i + 1).is_some_and(|n| n.starts_with("tool")))
        });
        if hit {
            named.insert(t.name.as_str());
        }
    }
    named
}

/// The words of `example`'s own data ([`Example::own`]) that `answer` holds and none of
/// `seen` does (the task, what the tools showed and returned, the tools' descriptions): the
/// example copied into the answer. Whole words, any case. Regression: "I lost my copy of The
/// River Oracle. How much do I have to pay?" was answered "The book is in the Blue Hall, but I
/// don't know how many seats it has", the lookup example's hall.
pub fn echoed(example: &Example, answer: &str, seen: &[&str]) -> Vec<String> {
    let holds = crate::tools::holds_word;
    example
        .own
        .iter()
        .filter(|w| holds(answer, w) && !seen.iter().any(|s| holds(s, w)))
        .map(|w| w.to_string())
        .collect()
}

/// What the loop tells the model when its answer holds `words` of the worked example, with
/// the `task` it is to answer.
pub fn echo_message(words: &[String], task: &str) -> String {
    format!(
        "[check: {} in your answer {} from the worked example shown before this task, not from \
         this task or what the tools returned. Answer this task: {} Use the user's own data: \
         what was shown before the first step, or the tools.]",
        words
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(", "),
        if words.len() == 1 { "comes" } else { "come" },
        task.trim()
    )
}

/// The messages of `example`, as an earlier task of the conversation.
pub fn messages(example: &Example) -> Vec<Message> {
    let mut m = vec![Message::user(format!("Task: {}", example.task))];
    for (step, tool, result) in example.calls {
        m.push(Message::assistant(*step));
        m.push(Message::tool(observation_text(tool, result)));
    }
    m.push(Message::assistant(example.answer));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn info(name: &str) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: String::new(),
            args_schema: json!({"type": "object"}),
        }
    }

    #[test]
    fn every_example_is_made_of_valid_steps() {
        for e in BANK {
            for (step, tool, _) in e.calls {
                let v: Value = serde_json::from_str(step).unwrap_or_else(|_| panic!("{}", e.name));
                assert_eq!(v["action"], *tool, "{}", e.name);
                assert!(e.tools.contains(tool), "{}", e.name);
            }
            let v: Value = serde_json::from_str(e.answer).unwrap();
            assert_eq!(v["action"], "final_answer", "{}", e.name);
        }
    }

    #[test]
    fn the_closest_usable_example_is_chosen() {
        let all = [info("calculator"), info("sql"), info("search")];
        let name = |task: &str, tools: &[ToolInfo]| choose(task, tools).map(|e| e.name);
        assert_eq!(
            name("Tom has 12 apples and gives half of them to each of his 3 friends. How many are left?", &all),
            Some("word_problem")
        );
        assert_eq!(
            name("What is the price of the Helmet Pro?", &all),
            Some("lookup")
        );
        assert_eq!(
            name(
                "Which email address handles warranty claims according to the rules?",
                &all
            ),
            Some("search")
        );
        // Only calculator examples when the calculator is the only tool.
        let calc = [info("calculator")];
        assert!(choose("Which email address handles claims?", &calc)
            .is_none_or(|e| e.tools.iter().all(|t| *t == "calculator")));
        assert_eq!(name("Say hello in French.", &all), Some("direct"));
        assert_eq!(name("zebra", &all), Some("direct"));
        let arithmetic = name("What is 17 * 23?", &all);
        assert_eq!(arithmetic, Some("arithmetic"));
        assert_eq!(
            name("What is the square root of 144?", &all),
            Some("arithmetic")
        );
        assert_eq!(name("anything", &[]), Some("direct"));
        // The days between two dates of a row: both looked up, one taken from the other.
        assert_eq!(
            name(
                "How many days after it was placed was order 10259 shipped?",
                &all
            ),
            Some("dates_between")
        );
        assert_eq!(
            name("How many days did order 10277 take to ship?", &all),
            Some("dates_between")
        );
        // A period the documents give is no difference of two dates, nor is "before VAT".
        for task in [
            "Within how many days of delivery can unopened goods be returned?",
            "How many days before a vaccination is due is a reminder sent?",
            "An invoice comes to 200 euros before VAT. What is it with VAT added?",
        ] {
            assert_ne!(name(task, &all), Some("dates_between"), "{task}");
        }
        // With the `reason` action offered, word problems are shown worked with it.
        let with_reason = [info("calculator"), info("sql"), info("reason")];
        let word =
            "Tom has 12 apples and gives half of them to each of his 3 friends. How many are left?";
        assert_eq!(name(word, &with_reason), Some("word_problem_reasoned"));
        assert_eq!(
            name("A bike costs 200 dollars and is sold at a 20 percent discount. What is the sale price?", &with_reason),
            Some("percent_problem_reasoned")
        );
        assert_eq!(name("What is 17 * 23?", &with_reason), Some("arithmetic"));
        // Regression: with only the calculator and `reason`, "What is 17 * 23?" was shown the
        // reasoned percent problem (its only ranked word was "a number") and the 0.5B model
        // answered 421 without a call.
        let calc_reason = [info("calculator"), info("reason")];
        assert_eq!(name("What is 17 * 23?", &calc_reason), Some("arithmetic"));
        assert_eq!(name("What is 1200 / 16?", &calc_reason), Some("arithmetic"));
        // A task without a number is shown no word problem: there is nothing to compute.
        let docs = [info("calculator"), info("search"), info("reason")];
        let rounds = name("How many rounds does a task get by default at most?", &docs);
        assert_eq!(rounds, Some("search"));
        assert_eq!(
            name(
                "How many rolls does a bakery sell if it bakes twice a day?",
                &docs
            ),
            Some("word_problem_reasoned")
        );
    }

    #[test]
    fn a_task_that_names_a_tool_is_shown_no_example_calling_another() {
        // Regression: "repeated 2 times" chose the calculator example and the 0.5B model
        // called the calculator instead of the t.echo tool the task asked for.
        let tools = [info("calculator"), info("t.echo"), info("reason")];
        let task =
            "Use the t.echo tool to send back the text 'cairn', upper-cased, repeated 2 times.";
        assert_eq!(choose(task, &tools).map(|e| e.name), Some("direct"));
        let all = [info("calculator"), info("sql"), info("search")];
        // A plain name counts only as "the … tool"; as an everyday word it does not.
        let n = |task: &str| {
            let mut v: Vec<&str> = named_tools(task, &all).into_iter().collect();
            v.sort();
            v
        };
        assert_eq!(
            n("Use the search tool to find the refund rules."),
            ["search"]
        );
        assert_eq!(
            n("Search the notes for the refund rules."),
            Vec::<&str>::new()
        );
        assert_eq!(
            n("Ask the SQL tool, then the calculator tool."),
            ["calculator", "sql"]
        );
        assert_eq!(
            choose("Use the sql tool: how many products are there?", &all).map(|e| e.name),
            Some("count")
        );
        assert_eq!(n("Call t.echo."), Vec::<&str>::new());
        let echo = [info("t.echo")];
        assert_eq!(named_tools("Call t.echo.", &echo).len(), 1);
    }

    #[test]
    fn words_of_the_example_copied_into_an_answer_are_named() {
        let lookup = BANK.iter().find(|e| e.name == "lookup").unwrap();
        let task = "I lost my copy of The River Oracle. How much do I have to pay?";
        let answer = "The book is in the Blue Hall, but I don't know how many seats it has.";
        assert_eq!(echoed(lookup, answer, &[task]), ["Blue Hall", "seats"]);
        // A word the user's data holds too is theirs ("seats" a column of their database).
        assert_eq!(
            echoed(lookup, answer, &[task, "halls: hall_id, name, seats"]),
            ["Blue Hall"]
        );
        // Whole words only, and an answer of the task's own words passes.
        assert!(echoed(lookup, "The Bluehall seatsless", &[task]).is_empty());
        assert!(echoed(lookup, "It costs 29.5 euros.", &[task]).is_empty());
        let m = echo_message(&["Blue Hall".to_string()], task);
        assert!(m.starts_with("[check: \"Blue Hall\" in your answer comes from the worked example"));
        assert!(m.contains("Answer this task: I lost my copy"));
    }

    #[test]
    fn operators_read_as_words_and_hyphens_do_not() {
        assert_eq!(words("17 * 23"), ["0", "times", "0"]);
        // Regression: "Use the calculator on 7 x 6" was shown the percent problem.
        assert_eq!(words("7 x 6"), ["0", "times", "0"]);
        assert_eq!(words("box x 6 and 7x6"), ["box", "x", "0", "7x6"]);
        assert_eq!(words("80 - 15"), ["0", "minus", "0"]);
        assert_eq!(
            words("a 2-year plan by e-mail"),
            ["0", "year", "plan", "e", "mail"]
        );
        assert_eq!(words("(3 + 4) / 7"), ["0", "plus", "0", "divided", "0"]);
    }
}
