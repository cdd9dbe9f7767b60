//! Wrappers around a store, written once: a [`Layer`] holds an inner store and gets every
//! store trait the inner one has, each call forwarded through [`Layer::around`]. The request
//! meter's scopes are one layer; the tests' observing store is another.

use std::future::Future;
use std::pin::Pin;

use cronledger_core::{Run, RunKey};

use crate::error::StoreError;
use crate::ledger::RunChange;
use crate::store::RunStore;

/// A boxed call, as the store traits return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A store around an inner one. Implement `inner` (and `around` or `intercept_transition` to
/// change something); the store traits come with it.
pub trait Layer: Send + Sync {
    type Inner: ?Sized + Send + Sync;

    fn inner(&self) -> &Self::Inner;

    /// Wraps each forwarded call; `operation` is the store method's name.
    fn around<'a, T: 'a>(
        &'a self,
        operation: &'static str,
        call: BoxFuture<'a, T>,
    ) -> BoxFuture<'a, T> {
        let _ = operation;
        call
    }

    /// The run transition the layer forwards: the one write a wrapper may want to see or
    /// interleave with (tests do both).
    fn intercept_transition<'a>(
        &'a self,
        key: &'a RunKey,
        change: &'a RunChange,
    ) -> BoxFuture<'a, Result<Run, StoreError>>
    where
        Self::Inner: RunStore,
    {
        self.inner().transition_run(key, change)
    }
}

/// Declares a store trait (async, `Send + Sync`) and its forwarding through any [`Layer`]
/// whose inner store has it, from one list of methods (no default bodies: each store says
/// what it does). `transition_run` forwards through [`Layer::intercept_transition`].
macro_rules! store_trait {
    (
        $(#[$trait_meta:meta])*
        pub trait $trait:ident {
            $(
                $(#[$meta:meta])*
                async fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
            )*
        }
    ) => {
        $(#[$trait_meta])*
        #[async_trait::async_trait]
        pub trait $trait: Send + Sync {
            $(
                $(#[$meta])*
                async fn $name(&self $(, $arg: $ty)*) -> $ret;
            )*
        }

        #[async_trait::async_trait]
        impl<L> $trait for L
        where
            L: $crate::layer::Layer,
            L::Inner: $trait,
        {
            $(
                async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    let call = $crate::layer::store_trait!(@call self, $name ($($arg),*));
                    self.around(stringify!($name), call).await
                }
            )*
        }
    };
    (@call $store:ident, transition_run ($($arg:ident),*)) => {
        $store.intercept_transition($($arg),*)
    };
    (@call $store:ident, $name:ident ($($arg:ident),*)) => {
        $store.inner().$name($($arg),*)
    };
}

pub(crate) use store_trait;
