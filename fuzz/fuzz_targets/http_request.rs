#![no_main]
include!("../limit.rs");
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpvisor::fuzzing::http_request(data));
