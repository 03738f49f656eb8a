//! The text of a caught panic, shared by every layer that turns panics into errors (rank
//! threads, driver calls, campaign tasks, the C boundary).

use std::any::Any;

/// The message of a panic payload from `std::panic::catch_unwind` or `JoinHandle::join`:
/// the `&str` or `String` that `panic!` carries, or a placeholder for any other payload.
pub fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text
    } else {
        "a panic with a non-text payload"
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn reads_both_text_payloads_and_names_the_others() {
        let literal = std::panic::catch_unwind(|| panic!("literal")).unwrap_err();
        assert_eq!(panic_message(literal.as_ref()), "literal");
        let formatted = std::panic::catch_unwind(|| panic!("rank {}", 3)).unwrap_err();
        assert_eq!(panic_message(formatted.as_ref()), "rank 3");
        let other = std::panic::catch_unwind(|| std::panic::panic_any(7_u32)).unwrap_err();
        assert_eq!(
            panic_message(other.as_ref()),
            "a panic with a non-text payload"
        );
    }
}
