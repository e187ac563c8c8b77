//! Fields most objects leave empty (a charge's customer, an intent's texts, a refund's
//! charge in the ledger), kept in one box that exists only while one of them is set: a
//! plain object carries 8 bytes for all of them instead of their room.

/// `fields` boxed, or `None` when every one is empty (its `Default`).
pub fn boxed<T: Default + PartialEq>(fields: T) -> Option<Box<T>> {
    (fields != T::default()).then(|| Box::new(fields))
}

/// Changes the fields in `slot` with `f`, in their box when there is one: the box is
/// made when a field is set, and dropped when all are empty again (a change that leaves
/// them as they were allocates nothing).
pub fn change<T: Default + PartialEq>(slot: &mut Option<Box<T>>, f: impl FnOnce(&mut T)) {
    match slot {
        Some(fields) => {
            f(fields);
            if **fields == T::default() {
                *slot = None;
            }
        }
        None => {
            let mut fields = T::default();
            f(&mut fields);
            *slot = boxed(fields);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq)]
    struct Fields {
        a: Option<u8>,
        b: Option<u8>,
    }

    #[test]
    fn the_box_lives_while_a_field_is_set() {
        assert_eq!(boxed(Fields::default()), None);
        let mut slot = None;
        change(&mut slot, |f: &mut Fields| f.a = Some(1));
        let first: *const Fields = slot.as_deref().unwrap();
        change(&mut slot, |f| f.b = Some(2));
        assert_eq!(slot.as_deref(), Some(&Fields { a: Some(1), b: Some(2) }));
        assert!(std::ptr::eq(first, slot.as_deref().unwrap()), "changed in its box");
        change(&mut slot, |f| f.a = None);
        change(&mut slot, |f| f.a = None);
        assert_eq!(slot.as_deref(), Some(&Fields { a: None, b: Some(2) }));
        change(&mut slot, |f| *f = Fields::default());
        assert!(slot.is_none(), "emptied: the box is gone");
    }
}
