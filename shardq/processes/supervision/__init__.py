"""supervision"""
