//! Shared test support. Each integration test file that needs it says `mod support;`.
#![allow(dead_code)]

pub mod cluster;
pub mod ledger;
pub mod postgres;
pub mod proxy;
pub mod queue;
pub mod redis;
pub mod sentinel;
pub mod tls;
pub mod webdriver;
