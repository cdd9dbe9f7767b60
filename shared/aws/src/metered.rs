//! The request meter's scopes as a store layer: every store call runs under its method's
//! name (`create_run`, `fire_all`, ...), so the meter attributes the requests it makes to
//! it. Both stores are wrapped the same way; their own code never names a scope.

use std::ops::Deref;

use cronledger_ledger::layer::{BoxFuture, Layer};

use crate::meter::metered;

/// `S` with each store call metered under its operation's name.
#[derive(Debug, Clone)]
pub struct Metered<S>(S);

impl<S> Metered<S> {
    pub fn wrap(store: S) -> Metered<S> {
        Metered(store)
    }

    pub fn store(&self) -> &S {
        &self.0
    }
}

impl<S> Deref for Metered<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.0
    }
}

impl<S: Send + Sync> Layer for Metered<S> {
    type Inner = S;

    fn inner(&self) -> &S {
        &self.0
    }

    fn around<'a, T: 'a>(
        &'a self,
        operation: &'static str,
        call: BoxFuture<'a, T>,
    ) -> BoxFuture<'a, T> {
        Box::pin(metered(operation, call))
    }
}
