//! The GGUF header reader on any bytes, in memory: an accepted header or a `ModelError`, never
//! a panic, an abort or an allocation far beyond the input (run with `-malloc_limit_mb`).

#![no_main]

use std::io::Cursor;
use std::path::Path;

use cairn::model::gguf::read_header;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.gguf");
    let Ok(content) = read_header(&mut Cursor::new(data), path, data.len() as u64) else {
        return;
    };
    // An accepted header promises that every tensor's data lies inside the bytes, computed
    // here without wrapping arithmetic.
    for (name, info) in &content.tensor_infos {
        let end = info
            .shape
            .dims()
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .map(|n| n / info.ggml_dtype.block_size())
            .and_then(|blocks| blocks.checked_mul(info.ggml_dtype.type_size()))
            .and_then(|bytes| content.tensor_data_offset.checked_add(bytes as u64))
            .and_then(|start| start.checked_add(info.offset));
        assert!(
            end.is_some_and(|end| end <= data.len() as u64),
            "accepted tensor `{name}` {:?} at offset {} past the end of {} bytes",
            info.shape.dims(),
            info.offset,
            data.len()
        );
    }
});
