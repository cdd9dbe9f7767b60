//! Helpers for the emulator-backed integration tests (filled in below).
