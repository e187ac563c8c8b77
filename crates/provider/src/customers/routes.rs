//! The customer endpoints: create, list, search, retrieve, update, delete, and the
//! customer's payment methods (listed, or one retrieved).

use crate::endpoint::Endpoint;

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint::post("/v1/customers", |p, c| p.create_customer(c.params, c.attempt)),
    Endpoint::get("/v1/customers", |p, c| p.list_customers(c.params)),
    Endpoint::get("/v1/customers/search", |p, c| p.search_customers(c.params)),
    Endpoint::get("/v1/customers/{id}", |p, c| p.retrieve_customer(c.id)),
    Endpoint::post("/v1/customers/{id}", |p, c| {
        p.update_customer(c.id, c.params, c.attempt)
    }),
    Endpoint::delete("/v1/customers/{id}", |p, c| p.delete_customer(c.id, c.attempt)),
    Endpoint::get("/v1/customers/{id}/payment_methods", |p, c| {
        p.list_customer_payment_methods(c.id, c.params)
    }),
    Endpoint::get("/v1/customers/{id}/payment_methods/{sub}", |p, c| {
        p.retrieve_customer_payment_method(c.id, c.sub)
    }),
];
