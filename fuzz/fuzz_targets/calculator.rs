//! The calculator on any text: an error or a value, never a panic, a hang or a stack overflow
//! (parentheses, function calls and `^` chains nest at most `MAX_DEPTH` deep).

#![no_main]

use cairn::tools::calculator::{evaluate, Num};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(expr) = std::str::from_utf8(data) else {
        return;
    };
    match evaluate(expr) {
        Ok(v) => {
            if let Num::Approx(f) = v {
                assert!(f.is_finite(), "`{expr}` gave the non-finite float {f}");
            }
            // Printing is part of the tool's answer.
            let _ = v.to_string();
        }
        Err(e) => {
            let len = expr.chars().count();
            assert!(
                (1..=len + 1).contains(&e.position),
                "`{expr}`: position {} outside 1..={}",
                e.position,
                len + 1
            );
        }
    }
});
