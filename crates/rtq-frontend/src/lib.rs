//! rtq-frontend
